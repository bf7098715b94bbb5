"""Live sessions on one worker: ids, quotas, families of forks, idle expiry.

A session's state lives in one process; it is never replayed. When it ends (closed, expired,
killed by a cell, lost with its worker) later calls get a clear answer from a tombstone.
"""

import asyncio
import collections
import contextlib
import logging
import time
import uuid
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field, replace

from executor.jail_code import StagedJailCode
from executor.jail_process import SlotConfig
from executor.jobs import (
    CellResult,
    SessionCreateRequest,
    SessionExecuteRequest,
    SessionInfo,
    SessionState,
)
from executor.limits import MIB, JobLimits
from executor.live_session import CellLimits, LiveSession
from executor.pool import slot_config
from executor.session_host import HostFailure, SessionHost
from executor.settings import SandboxSettings, SessionSettings

log = logging.getLogger(__name__)


def session_uid_base(sandbox: SandboxSettings) -> int:
    """Session jails take the outside ids right after this worker's warm slots."""
    return sandbox.uid_base + sandbox.slots


def worker_uid_span(sandbox: SandboxSettings, sessions: SessionSettings) -> int:
    """Outside ids one worker uses: warm slots, then one per possible session jail."""
    return sandbox.slots + sessions.max_sessions + sessions.spare_hosts


class SessionError(Exception):
    """A session request that cannot be served; ``reason`` says why in one word."""

    reason = "error"


class SessionNotFound(SessionError):
    """No such session on this worker, now or recently."""

    reason = "not_found"


class SessionGone(SessionError):
    """The session ended; ``state`` says how."""

    reason = "gone"

    def __init__(self, session_id: str, state: SessionState) -> None:
        super().__init__(f"session {session_id} is {state.value}")
        self.state = state


class SessionQuotaExceeded(SessionError):
    """A per-worker or per-client limit on live sessions is reached."""

    reason = "quota"


class SessionBusy(SessionError):
    """The session's process failed to serve the request (it has been ended)."""

    reason = "broken"


@dataclass
class _Family:
    host: SessionHost
    members: set[str] = field(default_factory=set)


@dataclass
class _Session:
    id: str
    live: LiveSession
    family: _Family
    limits: JobLimits
    idle_ttl_s: float
    parent_id: str | None
    client_id: str | None
    last_used: float = field(default_factory=time.monotonic)
    cells_run: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    def info(self, state: SessionState = SessionState.ALIVE) -> SessionInfo:
        return SessionInfo(
            id=self.id, state=state, parent_id=self.parent_id, client_id=self.client_id,
            cells_run=self.cells_run, idle_ttl_s=self.idle_ttl_s,
            idle_s=time.monotonic() - self.last_used,
            memory_mb=self.limits.memory_bytes // MIB, timeout_s=self.limits.timeout_s,
        )  # fmt: skip


class SessionManager:
    """All live sessions of one worker."""

    def __init__(self, sandbox: SandboxSettings, settings: SessionSettings) -> None:
        self.sandbox = sandbox
        self.settings = settings
        self._sessions: dict[str, _Session] = {}
        self._ended: collections.OrderedDict[str, SessionState] = collections.OrderedDict()
        self._spares: list[SessionHost] = []
        self._free_host_indices = list(range(settings.max_sessions + settings.spare_hosts))
        self._jail_code: StagedJailCode | None = None
        self._config: SlotConfig | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def live_sessions(self) -> int:
        """Sessions alive on this worker."""
        return len(self._sessions)

    async def start(self) -> None:
        """Prepares the host jails' configuration and the first spare hosts."""
        self._jail_code = StagedJailCode()
        base = slot_config(self.sandbox, (tuple(self.sandbox.preload_modules),), self._jail_code)
        memory_limit_bytes = self.settings.host_memory_mb * MIB
        pids_limit = base.pids_limit * 4
        self._config = replace(base, memory_limit_bytes=memory_limit_bytes, pids_limit=pids_limit)
        for _ in range(self.settings.spare_hosts):
            self._spares.append(await self._start_host())
        self._spawn(self._expire_idle())

    async def stop(self) -> None:
        """Ends every session and host."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        families = {id(s.family): s.family for s in self._sessions.values()}
        for session_id in list(self._sessions):
            self._forget(session_id, SessionState.CLOSED)
        hosts = [family.host for family in families.values()] + self._spares
        await asyncio.gather(*(self._stop_host(host) for host in hosts))
        if self._jail_code is not None:
            self._jail_code.close()

    async def create(self, request: SessionCreateRequest) -> SessionInfo:
        """A new session in a jail of its own (its family's)."""
        self._check_quota(request.client_id, 1)
        limits = JobLimits.resolve(self.sandbox, request.timeout_s, request.memory_mb)
        host = await self._take_spare()
        family = _Family(host)
        try:
            live = await host.open(self._process_limits(limits))
        except (HostFailure, OSError, TimeoutError) as exc:
            await self._stop_host(host)
            raise SessionBusy(f"could not start a session: {exc}") from exc
        ttl_s = min(request.idle_ttl_s or self.settings.default_idle_ttl_s,
                    self.settings.max_idle_ttl_s)  # fmt: skip
        session = self._add(live, family, limits, ttl_s, None, request.client_id)
        return session.info()

    async def execute(self, session_id: str, request: SessionExecuteRequest) -> CellResult:
        """Runs one cell; a cell that times out, floods or runs out of memory ends the session."""
        session = self._get(session_id)
        async with session.lock:
            session = self._get(session_id)
            timeout_s = min(request.timeout_s or session.limits.timeout_s,
                            self.sandbox.max_timeout_s)  # fmt: skip
            limits = CellLimits(timeout_s, self.sandbox.output_cap_bytes,
                                self.sandbox.output_kill_bytes)  # fmt: skip
            execution, alive = await session.live.run_cell(
                request.code, request.stdin, request.echo_last_expr, limits
            )
            session.cells_run += 1
            session.last_used = time.monotonic()
            state = SessionState.ALIVE if alive else SessionState.KILLED
            if not alive:
                await self._end(session_id, state)
        return CellResult(**execution.model_dump(), session_id=session_id, session_state=state)

    async def fork(
        self, session_id: str, n: int, client_id: str | None = None
    ) -> list[SessionInfo]:
        """``n`` independent copies of a session, in its family's jail."""
        if n > self.settings.max_fork:
            raise SessionQuotaExceeded(f"n={n} exceeds max_fork={self.settings.max_fork}")
        session = self._get(session_id)
        self._check_quota(client_id or session.client_id, n)
        async with session.lock:
            session = self._get(session_id)
            try:
                copies = await session.live.fork(n)
            except (OSError, TimeoutError, RuntimeError) as exc:
                await self._end(session_id, SessionState.KILLED)
                raise SessionBusy(f"fork failed, the session was ended: {exc}") from exc
            session.last_used = time.monotonic()
            added = [
                self._add(live, session.family, session.limits, session.idle_ttl_s, session_id,
                          client_id or session.client_id)
                for live in copies
            ]  # fmt: skip
        return [copy.info() for copy in added]

    async def close(self, session_id: str) -> SessionInfo:
        """Ends a session at its client's request."""
        session = self._get(session_id)
        info = session.info(SessionState.CLOSED)
        await self._end(session_id, SessionState.CLOSED)
        return info

    def info(self, session_id: str) -> SessionInfo:
        """A session's description; ended sessions say how they ended."""
        return self._get(session_id).info()

    def _get(self, session_id: str) -> _Session:
        session = self._sessions.get(session_id)
        if session is not None:
            return session
        state = self._ended.get(session_id)
        if state is not None:
            raise SessionGone(session_id, state)
        raise SessionNotFound(f"no session {session_id}")

    def _check_quota(self, client_id: str | None, n: int) -> None:
        if len(self._sessions) + n > self.settings.max_sessions:
            raise SessionQuotaExceeded(
                f"this worker holds {len(self._sessions)} of {self.settings.max_sessions} sessions"
            )
        if client_id is None:
            return
        held = sum(1 for s in self._sessions.values() if s.client_id == client_id)
        if held + n > self.settings.max_sessions_per_client:
            raise SessionQuotaExceeded(
                f"client {client_id!r} holds {held} of "
                f"{self.settings.max_sessions_per_client} sessions"
            )

    def _process_limits(self, limits: JobLimits) -> dict[str, object]:
        return {**asdict(limits), "cpu_time_s": self.settings.cpu_budget_s}

    def _add(
        self, live: LiveSession, family: _Family, limits: JobLimits, ttl_s: float,
        parent_id: str | None, client_id: str | None,
    ) -> _Session:  # fmt: skip
        session_id = uuid.uuid4().hex
        session = _Session(session_id, live, family, limits, ttl_s, parent_id, client_id)
        self._sessions[session_id] = session
        family.members.add(session_id)
        return session

    async def _end(self, session_id: str, state: SessionState) -> None:
        session = self._sessions.get(session_id)
        if session is None:
            return
        await session.live.kill()
        family = self._forget(session_id, state)
        if family is not None and not family.members:
            await self._stop_host(family.host)

    def _forget(self, session_id: str, state: SessionState) -> _Family | None:
        session = self._sessions.pop(session_id, None)
        if session is None:
            return None
        with contextlib.suppress(OSError):
            session.live.close()
        session.family.members.discard(session_id)
        self._ended[session_id] = state
        while len(self._ended) > self.settings.tombstones:
            self._ended.popitem(last=False)
        return session.family

    async def _take_spare(self) -> SessionHost:
        host = self._spares.pop() if self._spares else await self._start_host()
        if len(self._spares) < self.settings.spare_hosts:
            self._spawn(self._replenish())
        return host

    async def _replenish(self) -> None:
        while len(self._spares) < self.settings.spare_hosts:
            self._spares.append(await self._start_host())

    async def _start_host(self) -> SessionHost:
        """A host jail with the lowest free outside id of this worker's session range."""
        assert self._config is not None, "SessionManager.start() was not called"
        if not self._free_host_indices:
            raise SessionQuotaExceeded("every session jail of this worker is in use")
        index = self._free_host_indices.pop(0)
        outside_id = session_uid_base(self.sandbox) + index
        host = SessionHost(index, outside_id, self._config)
        try:
            await host.start()
        except BaseException:
            self._free_host_indices.append(index)
            raise
        return host

    async def _stop_host(self, host: SessionHost) -> None:
        await host.stop()
        self._free_host_indices.append(host.index)
        self._free_host_indices.sort()

    async def _expire_idle(self) -> None:
        while True:
            await asyncio.sleep(self.settings.expiry_interval_s)
            now = time.monotonic()
            for session in list(self._sessions.values()):
                idle_s = now - session.last_used
                if idle_s > session.idle_ttl_s and not session.lock.locked():
                    log.info("session %s expired after %.0f s idle", session.id, idle_s)
                    await self._end(session.id, SessionState.EXPIRED)
                elif not session.live.alive and not session.lock.locked():
                    await self._end(session.id, SessionState.KILLED)

    def _spawn(self, coro: Coroutine[object, object, None]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
