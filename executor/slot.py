"""A slot: one long-lived nsjail process running a zygote, serving one job at a time."""

import asyncio
import collections
import ctypes
import json
import logging
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from executor import framing
from executor.cgroups import CgroupBackend
from executor.jail_code import BOOTSTRAP, JAIL_CODE_DIR
from executor.jobs import Execution
from executor.limits import SandboxJob
from executor.nsjail import JailSpec, SandboxUnavailable, build_command

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 40
STOP_GRACE_S = 2.0
WIPE_MARGIN_S = 2.0
PR_SET_PDEATHSIG = 1


class SlotFailure(RuntimeError):
    """The slot died or broke protocol while holding a job: our fault, not the code's."""


@dataclass(frozen=True)
class SlotConfig:
    """What every slot of a pool shares."""

    binary: Path
    python: Path
    jail_code: Path
    cgroup: CgroupBackend
    preload: tuple[str, ...]
    memory_limit_bytes: int
    pids_limit: int
    start_timeout_s: float
    kill_grace_s: float


def _die_with_parent() -> None:
    # Runs in the forked nsjail before exec: if the worker dies, so does the jail.
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class Slot:
    """One jailed zygote. ``run`` is not re-entrant: the pool hands a slot to one job at a time."""

    def __init__(self, index: int, outside_id: int, config: SlotConfig) -> None:
        self.index = index
        self.outside_id = outside_id
        self.config = config
        self.jobs_run = 0
        self.busy = False
        self.start_s = 0.0
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        """True while the jail process runs."""
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The nsjail process's pid on the host, while it runs."""
        return self._proc.pid if self.alive and self._proc is not None else None

    def stderr_tail(self) -> str:
        """The last lines nsjail and the zygote wrote: the cause when a slot fails."""
        return "\n".join(self._stderr_tail)

    async def start(self) -> None:
        """Starts the jail and waits for the zygote's ready frame."""
        config = self.config
        spec = JailSpec(self.outside_id, config.memory_limit_bytes, config.pids_limit)
        zygote_args = ["-c", BOOTSTRAP, json.dumps({"preload": list(config.preload)})]
        binds = ((config.jail_code, JAIL_CODE_DIR),)
        argv = build_command(config.binary, config.python, config.cgroup, spec, zygote_args, binds)
        started = time.monotonic()
        self._proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )
        self._stderr_task = asyncio.create_task(self._collect_stderr())
        try:
            assert self._proc.stdout is not None
            ready = await asyncio.wait_for(framing.read(self._proc.stdout), config.start_timeout_s)
        except (framing.FrameError, TimeoutError) as exc:
            await self.stop()
            raise SandboxUnavailable(
                f"slot {self.index}: the sandbox did not start ({exc}); nsjail said:\n"
                f"{self.stderr_tail() or '(nothing)'}"
            ) from exc
        self.start_s = time.monotonic() - started
        log.debug("slot %d ready in %.3f s: %s", self.index, self.start_s, ready)

    async def run(self, job: SandboxJob) -> Execution:
        """Runs one job; raises SlotFailure (after stopping the jail) if the slot breaks."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None or not self.alive:
            raise SlotFailure(f"slot {self.index} is not running")
        budget_s = job.limits.timeout_s + self.config.kill_grace_s + WIPE_MARGIN_S
        self.busy = True
        try:
            proc.stdin.write(framing.encode(job.to_wire()))
            await proc.stdin.drain()
            message = await asyncio.wait_for(framing.read(proc.stdout), budget_s)
        except (framing.FrameError, TimeoutError, ConnectionError) as exc:
            await self.stop()
            raise SlotFailure(
                f"slot {self.index} failed: {exc!r}; nsjail said:\n{self.stderr_tail()}"
            ) from exc
        finally:
            self.busy = False
        self.jobs_run += 1
        return Execution.model_validate(message)

    async def stop(self) -> None:
        """Ends the jail: EOF first (the zygote exits), then SIGTERM, then SIGKILL."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            if proc.stdin is not None:
                proc.stdin.close()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
                    break
                except TimeoutError:
                    proc.send_signal(sig)
            await proc.wait()
        if self._stderr_task is not None:
            await self._stderr_task

    async def _collect_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        async for raw in self._proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line and "no version information available" not in line:
                self._stderr_tail.append(line)
                log.debug("slot %d: %s", self.index, line)
