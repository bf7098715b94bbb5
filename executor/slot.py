"""A slot: a few long-lived jailed zygotes (lightest to fully preloaded), one job at a time.

Each zygote is its own nsjail process. The zygotes of one slot share its outside uid: they
never run jobs at the same time, and each jail has its own pid, mount and ipc namespaces.
"""

import asyncio
import logging
import random
import time

from executor import framing, job_wire
from executor.jail_process import JailProcess, SlotConfig
from executor.jobs import Execution
from executor.limits import SandboxJob
from executor.nsjail import SandboxUnavailable

log = logging.getLogger(__name__)

WIPE_MARGIN_S = 2.0


class SlotFailure(RuntimeError):
    """The slot died or broke protocol while holding a job: our fault, not the code's."""


class Zygote:
    """One jailed zygote with one preload. ``run`` is not re-entrant."""

    def __init__(
        self, name: str, outside_id: int, config: SlotConfig, preload: tuple[str, ...]
    ) -> None:
        self.name = name
        self.outside_id = outside_id
        self.config = config
        self.preload = preload
        self.jobs_run = 0
        self.start_s = 0.0
        self.huge_pages = 0  # how many 2 MiB pages the zygote's heap was collapsed into
        self.fork_hooks = True  # whether its children run Python's at-fork hooks (slower)
        self._jail = JailProcess(name)

    @property
    def alive(self) -> bool:
        """True while the jail process runs."""
        return self._jail.alive

    @property
    def pid(self) -> int | None:
        """The nsjail process's pid on the host, while it runs."""
        return self._jail.pid

    async def start(self) -> None:
        """Starts the jail and waits for the zygote's ready frame."""
        started = time.monotonic()
        pipe = asyncio.subprocess.PIPE
        argv = self.config.argv(self.outside_id, {"preload": list(self.preload)})
        proc = await self._jail.spawn(argv, pipe, pipe)
        try:
            assert proc.stdout is not None
            ready = await asyncio.wait_for(framing.read(proc.stdout), self.config.start_timeout_s)
        except (framing.FrameError, TimeoutError) as exc:
            await self.stop()
            raise SandboxUnavailable(
                f"{self.name}: the sandbox did not start ({exc}); nsjail said:\n"
                f"{self._jail.stderr_tail()}"
            ) from exc
        self.start_s = time.monotonic() - started
        self.huge_pages = int(ready.get("huge_pages", 0))
        self.fork_hooks = bool(ready.get("fork_hooks", True))
        log.debug("%s ready in %.3f s: %s", self.name, self.start_s, ready)

    async def run(self, job: SandboxJob) -> Execution:
        """Runs one job; raises SlotFailure (after stopping the jail) if the zygote breaks."""
        proc = self._jail.proc
        if proc is None or proc.stdin is None or proc.stdout is None or not self.alive:
            raise SlotFailure(f"{self.name} is not running")
        budget_s = job.limits.timeout_s + self.config.kill_grace_s + WIPE_MARGIN_S
        self.jobs_run += 1
        try:
            proc.stdin.write(job_wire.encode_job(job))
            await proc.stdin.drain()
            body = await asyncio.wait_for(job_wire.read_result(proc.stdout), budget_s)
            return job_wire.decode_result(body, job.limits.cpu_time_s)
        except (framing.FrameError, TimeoutError, ConnectionError) as exc:
            await self.stop()
            raise SlotFailure(
                f"{self.name} failed: {exc!r}; nsjail said:\n{self._jail.stderr_tail()}"
            ) from exc

    async def stop(self) -> None:
        """Ends the jail (EOF, then SIGTERM, then SIGKILL)."""
        proc = self._jail.proc

        def close_input() -> None:
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()

        await self._jail.stop(close_input)


class Slot:
    """One job at a time, on the slot's zygote of the tier the pool chose for it.

    Each zygote is recycled on its own after about ``recycle_after_jobs`` jobs; the count is
    spread by up to a quarter per zygote, so that slots started together (a worker's whole
    pool) do not all restart their zygotes in the same second.
    """

    def __init__(
        self, index: int, outside_id: int, config: SlotConfig, recycle_after_jobs: int = 0
    ) -> None:
        self.index = index
        self.outside_id = outside_id
        self.busy = False
        self._config = config
        self._recycle_after_jobs = recycle_after_jobs
        self.zygotes = [self._new_zygote(tier) for tier in range(len(config.tiers))]
        self.recycle_at = [self._recycle_point() for _ in self.zygotes]  # per tier; 0: never

    def _new_zygote(self, tier: int) -> Zygote:
        name = f"slot {self.index} tier {tier}"
        return Zygote(name, self.outside_id, self._config, self._config.tiers[tier])

    def _recycle_point(self) -> int:
        jobs = self._recycle_after_jobs
        return jobs + random.randrange(max(1, jobs // 4)) if jobs else 0

    def recycle_due(self, tier: int) -> bool:
        """True when the zygote of ``tier`` has run its share of jobs and should restart."""
        at = self.recycle_at[tier]
        return bool(at) and self.zygotes[tier].jobs_run >= at

    @property
    def alive(self) -> bool:
        """True while every zygote's jail runs."""
        return all(zygote.alive for zygote in self.zygotes)

    @property
    def pids(self) -> tuple[int | None, ...]:
        """The nsjail processes' host pids, one per tier."""
        return tuple(zygote.pid for zygote in self.zygotes)

    @property
    def start_s(self) -> float:
        """How long the slowest zygote took to start."""
        return max(zygote.start_s for zygote in self.zygotes)

    async def start(self) -> None:
        """Starts every zygote; if one cannot start, stops the others and raises its error."""
        results = await asyncio.gather(
            *(zygote.start() for zygote in self.zygotes), return_exceptions=True
        )
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            await self.stop()
            raise failure

    async def run(self, job: SandboxJob, tier: int) -> Execution:
        """Runs one job on the zygote of ``tier``; raises SlotFailure if it breaks."""
        self.busy = True
        try:
            return await self.zygotes[tier].run(job)
        finally:
            self.busy = False

    async def restart(self, tier: int) -> float:
        """Replaces the zygote of ``tier`` with a fresh one; returns its start time in seconds.

        Raises SandboxUnavailable if the new one cannot start (the slot then lacks that tier
        until a later restart succeeds).
        """
        await self.zygotes[tier].stop()
        self.zygotes[tier] = self._new_zygote(tier)
        self.recycle_at[tier] = self._recycle_point()
        await self.zygotes[tier].start()
        return self.zygotes[tier].start_s

    async def stop(self) -> None:
        """Ends every zygote's jail."""
        await asyncio.gather(*(zygote.stop() for zygote in self.zygotes))
