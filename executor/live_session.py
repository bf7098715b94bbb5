"""One live session process seen from the worker: run a cell, fork copies, kill.

The worker owns the session's descriptors directly (its control socket, the read ends of its
stdout and stderr, a pidfd), so cells of many sessions run concurrently under one event loop
while the jail's host process only spawns and reaps.
"""

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from executor import framing
from executor.jail.capture import Capture, read_available
from executor.jobs import Execution, Status
from executor.session_io import SocketFrames

OUTPUT_DRAIN_BUDGET_BYTES = 1 << 24
PROTOCOL_TIMEOUT_S = 15.0
EXIT_GRACE_S = 2.0


@dataclass(frozen=True)
class CellLimits:
    """Limits of one cell (memory and processes are the session's, set when it started)."""

    timeout_s: float
    output_cap_bytes: int
    output_kill_bytes: int


@dataclass
class Endpoints:
    """A new session's descriptors: the worker keeps one side, the session gets the other."""

    worker_sock: socket.socket
    session_sock: socket.socket
    out_r: int
    out_w: int
    err_r: int
    err_w: int

    @classmethod
    def create(cls) -> "Endpoints":
        worker_sock, session_sock = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        return cls(worker_sock, session_sock, out_r, out_w, err_r, err_w)

    def session_fds(self) -> list[int]:
        """What travels to the session (control socket, stdout and stderr write ends)."""
        return [self.session_sock.fileno(), self.out_w, self.err_w]

    def close_session_side(self) -> None:
        """Once sent, the session's ends are closed here so that EOF means what it says."""
        self.session_sock.close()
        os.close(self.out_w)
        os.close(self.err_w)


class _Report(BaseModel):
    exit_code: int
    memory_error: bool
    cpu_s: float
    max_rss_bytes: int


class SessionBroken(RuntimeError):
    """The session process stopped following the protocol (or died while we talked to it)."""


KillGroup = Callable[[int], Awaitable[None]]
ExitCode = Callable[[int], Awaitable[int | None]]


class LiveSession:
    """A session process. Not re-entrant: the manager runs one request per session at a time."""

    def __init__(
        self, endpoints: Endpoints, frames: SocketFrames, pidfd: int, ns_pid: int,
        kill_group: KillGroup, exit_code: ExitCode,
    ) -> None:  # fmt: skip
        self.ns_pid = ns_pid
        self._endpoints = endpoints
        self._frames = frames
        self._pidfd = pidfd
        self._kill_group = kill_group
        self._exit_code = exit_code
        self._exited = asyncio.Event()
        for fd in (endpoints.out_r, endpoints.err_r):
            os.set_blocking(fd, False)
        asyncio.get_running_loop().add_reader(pidfd, self._on_exit)

    @classmethod
    async def attach(
        cls, endpoints: Endpoints, kill_group: KillGroup, exit_code: ExitCode
    ) -> "LiveSession":
        """Waits for the new session's hello (its pid and a pidfd of itself)."""
        frames = SocketFrames(endpoints.worker_sock)
        hello, fds = await asyncio.wait_for(frames.recv_with_fds(1), PROTOCOL_TIMEOUT_S)
        if len(fds) != 1:
            raise SessionBroken("the session's hello carried no pidfd")
        return cls(endpoints, frames, fds[0], int(hello["pid"]), kill_group, exit_code)

    @property
    def alive(self) -> bool:
        """False once the process exited."""
        return not self._exited.is_set()

    async def run_cell(
        self, code: str, stdin: str, echo: bool, limits: CellLimits
    ) -> tuple[Execution, bool]:
        """Runs one cell; returns its execution and whether the session is still alive."""
        out, err = Capture(limits.output_cap_bytes), Capture(limits.output_cap_bytes)
        flooded = asyncio.Event()
        self._watch_output(out, err, limits.output_kill_bytes, flooded)
        started = time.monotonic()
        try:
            cell = {"op": "cell", "code": code, "stdin": stdin, "echo_last_expr": echo}
            await self._frames.send(cell)
            outcome = await self._await_report(limits.timeout_s, flooded)
        finally:
            self._unwatch_output(out, err)
        wall_s = time.monotonic() - started
        return await self._execution(outcome, out, err, wall_s)

    async def fork(self, n: int) -> list["LiveSession"]:
        """``n`` copies of this session's state, each a session of its own."""
        copies = [Endpoints.create() for _ in range(n)]
        try:
            await self._frames.send({"op": "fork", "n": n})
            for endpoints in copies:
                await self._frames.send_fds(endpoints.session_fds())
        finally:
            for endpoints in copies:
                endpoints.close_session_side()
        await asyncio.wait_for(self._frames.recv(), PROTOCOL_TIMEOUT_S)
        return [await LiveSession.attach(e, self._kill_group, self._exit_code) for e in copies]

    async def kill(self) -> None:
        """Ends the session and every process it started (its process group)."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        await self._kill_group(self.ns_pid)

    def close(self) -> None:
        """Releases the worker's descriptors (after ``kill``)."""
        loop = asyncio.get_running_loop()
        loop.remove_reader(self._pidfd)
        os.close(self._pidfd)
        self._frames.close()
        for fd in (self._endpoints.out_r, self._endpoints.err_r):
            os.close(fd)

    def _on_exit(self) -> None:
        self._exited.set()
        asyncio.get_running_loop().remove_reader(self._pidfd)

    def _watch_output(
        self, out: Capture, err: Capture, kill_bytes: int, flooded: asyncio.Event
    ) -> None:
        loop = asyncio.get_running_loop()

        def drain(fd: int, capture: Capture) -> None:
            read_available(fd, capture, OUTPUT_DRAIN_BUDGET_BYTES)
            if out.total_bytes + err.total_bytes > kill_bytes:
                flooded.set()

        loop.add_reader(self._endpoints.out_r, drain, self._endpoints.out_r, out)
        loop.add_reader(self._endpoints.err_r, drain, self._endpoints.err_r, err)

    def _unwatch_output(self, out: Capture, err: Capture) -> None:
        loop = asyncio.get_running_loop()
        for fd, capture in ((self._endpoints.out_r, out), (self._endpoints.err_r, err)):
            loop.remove_reader(fd)
            read_available(fd, capture, OUTPUT_DRAIN_BUDGET_BYTES)  # flushed before the report

    async def _await_report(self, timeout_s: float, flooded: asyncio.Event) -> _Report | str:
        """The cell's report, or why there is none: timeout, output_limit, exited, broken."""
        waits = {
            asyncio.create_task(self._frames.recv()): "report",
            asyncio.create_task(self._exited.wait()): "exited",
            asyncio.create_task(flooded.wait()): "output_limit",
        }
        done, pending = await asyncio.wait(waits, timeout=timeout_s, return_when="FIRST_COMPLETED")
        for task in pending:
            task.cancel()
        outcomes = {waits[task]: task for task in done}
        report = outcomes.pop("report", None)
        for task in outcomes.values():
            task.exception()  # retrieved: nothing to report
        if report is not None:
            try:
                return _Report.model_validate(report.result())
            except (framing.FrameError, ValidationError):
                # EOF on the socket often comes just before the pidfd says the process exited.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._exited.wait(), EXIT_GRACE_S)
                return "broken" if self.alive else "exited"
        if not outcomes:
            return "timeout"
        return "output_limit" if "output_limit" in outcomes else "exited"

    async def _execution(
        self, outcome: _Report | str, out: Capture, err: Capture, wall_s: float
    ) -> tuple[Execution, bool]:
        fields: dict[str, Any] = {
            "stdout": out.text(), "stderr": err.text(), "stdout_truncated": out.truncated,
            "stderr_truncated": err.truncated, "wall_s": wall_s,
        }  # fmt: skip
        if isinstance(outcome, _Report):
            if outcome.memory_error:  # a session that ran out of memory is not trusted again
                await self.kill()
            status = _report_status(outcome)
            execution = Execution(
                status=status, exit_code=outcome.exit_code, cpu_s=outcome.cpu_s,
                max_rss_bytes=outcome.max_rss_bytes, **fields,
            )  # fmt: skip
            return execution, status != Status.MEMORY_LIMIT
        if outcome == "exited":
            exit_code = await self._exit_code(self.ns_pid)
            await self.kill()
            return _exit_execution(exit_code, fields), False
        await self.kill()
        if outcome == "broken":
            note = "codepool: the session broke its control channel and was ended\n"
            fields["stderr"] += note
            return Execution(status=Status.ERROR, **fields), False
        return Execution(status=Status(outcome), **fields), False


def _report_status(report: _Report) -> Status:
    if report.memory_error:
        return Status.MEMORY_LIMIT
    return Status.OK if report.exit_code == 0 else Status.ERROR


def _exit_execution(exit_code: int | None, fields: dict[str, Any]) -> Execution:
    if exit_code is not None and exit_code < 0:
        name = signal.Signals(-exit_code).name
        return Execution(status=Status.KILLED, signal=name, **fields)
    return Execution(status=Status.ERROR, exit_code=exit_code, **fields)
