"""A session host: one jail whose pid 1 spawns session processes for one family of sessions.

A family is a session and the copies forked from it (a GRPO group's rollouts): they share a
jail, its outside uid and its cgroup; different families never do.
"""

import asyncio
import json
import logging
import socket
import time
from typing import Any

from executor.jail_process import JailProcess, SlotConfig
from executor.live_session import PROTOCOL_TIMEOUT_S, Endpoints, LiveSession
from executor.nsjail import SandboxUnavailable

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 65536


class HostFailure(RuntimeError):
    """The host jail stopped answering: its sessions are gone."""


class SessionHost:
    """The jail of one session family."""

    def __init__(self, index: int, outside_id: int, config: SlotConfig) -> None:
        self.index = index
        self.outside_id = outside_id
        self.config = config
        self.start_s = 0.0
        self._jail = JailProcess(f"session host {index}")
        self._ctrl: socket.socket | None = None
        self._lock = asyncio.Lock()

    @property
    def alive(self) -> bool:
        """True while the jail runs."""
        return self._jail.alive

    async def start(self) -> None:
        """Starts the jail and waits until its host has preloaded and is ready."""
        started = time.monotonic()
        ctrl, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        argv = self.config.argv(self.outside_id, {"mode": "sessions"})
        try:
            await self._jail.spawn(argv, child.fileno(), child.fileno())
        finally:
            child.close()
        ctrl.setblocking(False)
        self._ctrl = ctrl
        try:
            await asyncio.wait_for(self._receive(), self.config.start_timeout_s)
        except (HostFailure, TimeoutError) as exc:
            await self.stop()
            raise SandboxUnavailable(
                f"session host {self.index} did not start ({exc!r}); nsjail said:\n"
                f"{self._jail.stderr_tail()}"
            ) from exc
        self.start_s = time.monotonic() - started

    async def open(self, limits: dict[str, Any]) -> LiveSession:
        """A new session process, forked from the warm host, with ``limits`` applied."""
        endpoints = Endpoints.create()
        try:
            await self._request({"op": "open", "limits": limits}, endpoints.session_fds())
        finally:
            endpoints.close_session_side()
        return await LiveSession.attach(endpoints, self.kill_group, self.exit_code)

    async def kill_group(self, ns_pid: int) -> None:
        """Kills a session's process group (what its cells started) inside the jail."""
        if self.alive:
            try:
                await self._request({"op": "kill", "pid": ns_pid})
            except HostFailure as exc:
                log.warning("session host %d: kill failed: %s", self.index, exc)

    async def exit_code(self, ns_pid: int) -> int | None:
        """How a session process ended (negative: the signal), if the host reaped it."""
        reply = await self._request({"op": "exit_status", "pid": ns_pid})
        code = reply.get("exit_code")
        return int(code) if code is not None else None

    async def stop(self) -> None:
        """Ends the jail and every session in it."""
        ctrl = self._ctrl

        def close_input() -> None:
            if ctrl is not None:
                ctrl.close()

        await self._jail.stop(close_input)

    async def _request(
        self, message: dict[str, Any], fds: list[int] | None = None
    ) -> dict[str, Any]:
        if self._ctrl is None or not self.alive:
            raise HostFailure(f"session host {self.index} is not running")
        async with self._lock:
            try:
                socket.send_fds(self._ctrl, [json.dumps(message).encode()], fds or [])
                return await asyncio.wait_for(self._receive(), PROTOCOL_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise HostFailure(f"session host {self.index}: {exc!r}") from exc

    async def _receive(self) -> dict[str, Any]:
        assert self._ctrl is not None
        data = await asyncio.get_running_loop().sock_recv(self._ctrl, MAX_MESSAGE_BYTES)
        if not data:
            raise HostFailure(f"session host {self.index} closed its socket")
        reply = json.loads(data)
        if not isinstance(reply, dict) or not reply.get("ok", True):
            raise HostFailure(f"session host {self.index} refused: {reply!r}")
        return reply
