"""A pool of sandbox slots: warm zygotes (default) or a fresh jail per job."""

import asyncio
import logging
import time
from collections.abc import Callable, Iterator

from executor import cgroups
from executor.jail_code import StagedJailCode
from executor.jail_process import SlotConfig
from executor.jobs import Execution, Status
from executor.limits import MIB, SandboxJob
from executor.nsjail import find_binary
from executor.settings import SandboxSettings
from executor.slot import Slot, SlotFailure
from executor.tiers import TierRouter

log = logging.getLogger(__name__)

# The zygote, the job's processes and headroom for threads a library may start.
PIDS_OVERHEAD = 8
# Fresh jails take outside ids from their own range, after the warm slots'.
FRESH_ID_OFFSET = 10_000


def slot_config(
    settings: SandboxSettings, tiers: tuple[tuple[str, ...], ...], jail_code: StagedJailCode
) -> SlotConfig:
    """The settings every slot of this pool is started with; ``tiers``: zygote preloads."""
    return SlotConfig(
        binary=find_binary(),
        python=settings.python,
        jail_code=jail_code.root,
        cgroup=cgroups.detect(settings.cgroup, settings.cgroup_parent),
        tiers=tiers,
        huge_pages=settings.huge_pages,
        memory_limit_bytes=(settings.max_memory_mb + settings.slot_memory_overhead_mb) * MIB,
        pids_limit=settings.max_processes + PIDS_OVERHEAD,
        start_timeout_s=settings.start_timeout_s,
        kill_grace_s=settings.kill_grace_s,
    )


class SlotPool:
    """Runs jobs on ``settings.slots`` concurrent slots; infrastructure failures become data."""

    def __init__(
        self, settings: SandboxSettings, on_slot_start: Callable[[float], None] | None = None
    ) -> None:
        self.settings = settings
        self._on_slot_start = on_slot_start
        self._config: SlotConfig | None = None
        self._router = TierRouter([()])
        self._jail_code: StagedJailCode | None = None
        # Last in, first out: the slot that ran most recently is the one whose zygote is still
        # in the CPU's caches. With fewer jobs than slots, the same few slots stay warm.
        self._idle: asyncio.Queue[Slot] = asyncio.LifoQueue()
        self._slots: dict[int, Slot] = {}
        self._free = asyncio.Semaphore(settings.slots)
        self._busy = 0
        self.restarts = 0  # slots replaced, recycled or broken
        self.slot_failures = 0  # slots that broke while holding a job
        self._fresh_ids = self._fresh_id_cycle()
        self._background: set[asyncio.Task[None]] = set()

    @property
    def free_slots(self) -> int:
        """Slots that could take a job now (what a worker claims from the queue)."""
        return self.settings.slots - self._busy

    @property
    def busy_slots(self) -> int:
        """Slots running a job now."""
        return self._busy

    @property
    def config(self) -> SlotConfig:
        """What the pool's jails are started with (after ``start``)."""
        return self._require_config()

    def tier_for(self, code: str) -> int:
        """The zygote tier a job with ``code`` runs on (0 = the lightest)."""
        return self._router.tier_for(code)

    def slots(self) -> list[Slot]:
        """The warm slots now in the pool (idle or busy)."""
        return list(self._slots.values())

    async def start(self) -> None:
        """Starts every warm slot; raises SandboxUnavailable naming the cause if one cannot."""
        warm = self.settings.isolation == "warm"
        tiers = self.settings.zygote_tiers() if warm else ((),)
        self._jail_code = StagedJailCode()
        self._config = slot_config(self.settings, tiers, self._jail_code)
        self._router = TierRouter(tiers)
        try:
            if warm:
                await self._start_warm_slots()
            else:
                await self._probe_fresh()
        except BaseException:
            await self.stop()
            raise

    async def _start_warm_slots(self) -> None:
        slots = [self._new_slot(i) for i in range(self.settings.slots)]
        results = await asyncio.gather(*(s.start() for s in slots), return_exceptions=True)
        failure = next((r for r in results if isinstance(r, BaseException)), None)
        if failure is not None:
            raise failure
        for slot in slots:
            self._started(slot.start_s)
            self._idle.put_nowait(slot)

    async def stop(self) -> None:
        """Stops every slot and background replacement."""
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        await asyncio.gather(*(slot.stop() for slot in self._slots.values()))
        if self._jail_code is not None:
            self._jail_code.close()

    async def run(self, job: SandboxJob) -> Execution:
        """Runs ``job`` and always returns a result; a broken slot gives ``sandbox_error``."""
        async with self._free:
            self._busy += 1
            try:
                if self.settings.isolation == "fresh":
                    return await self._run_fresh(job)
                return await self._run_warm(job)
            finally:
                self._busy -= 1

    async def _run_warm(self, job: SandboxJob) -> Execution:
        # A slot that breaks is replaced and the job retried once on a healthy one.
        tier = self._router.tier_for(job.code)
        for attempt in range(2):
            slot = await self._idle.get()
            try:
                result = await slot.run(job, tier)
            except SlotFailure as exc:
                self.slot_failures += 1
                log.warning("slot %d failed (attempt %d): %s", slot.index, attempt + 1, exc)
                self._replace(slot, tier)
                continue
            if slot.recycle_due(tier):
                self._replace(slot, tier)
            else:
                self._idle.put_nowait(slot)
            return result
        return sandbox_error("the sandbox slot failed twice while running this job")

    async def _run_fresh(self, job: SandboxJob) -> Execution:
        slot = Slot(-1, next(self._fresh_ids), self._require_config())
        started = time.monotonic()
        try:
            await slot.start()
            self._started(slot.start_s)
            result = await slot.run(job, 0)
        except (SlotFailure, RuntimeError) as exc:
            log.warning("fresh jail failed: %s", exc)
            return sandbox_error(f"the sandbox failed: {exc}")
        finally:
            await slot.stop()
        return result.model_copy(update={"wall_s": time.monotonic() - started})

    async def _probe_fresh(self) -> None:
        slot = Slot(-1, next(self._fresh_ids), self._require_config())
        try:
            await slot.start()
        finally:
            await slot.stop()

    def _new_slot(self, index: int) -> Slot:
        config = self._require_config()
        slot = Slot(index, self.settings.uid_base + index, config, self.settings.recycle_after_jobs)
        self._slots[index] = slot
        return slot

    def _replace(self, slot: Slot, tier: int) -> None:
        """Restarts the slot's zygote of ``tier`` in the background; the slot returns after."""
        self.restarts += 1
        task = asyncio.create_task(self._restart(slot, tier))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _restart(self, slot: Slot, tier: int) -> None:
        while True:
            try:
                start_s = await slot.restart(tier)
            except RuntimeError as exc:
                log.error("slot %d tier %d could not restart, retrying: %s", slot.index, tier, exc)
                await asyncio.sleep(1.0)
                continue
            self._started(start_s)
            self._idle.put_nowait(slot)
            return

    def _started(self, start_s: float) -> None:
        if self._on_slot_start is not None:
            self._on_slot_start(start_s)

    def _require_config(self) -> SlotConfig:
        if self._config is None:
            raise RuntimeError("SlotPool.start() was not called")
        return self._config

    def _fresh_id_cycle(self) -> Iterator[int]:
        base = self.settings.uid_base + FRESH_ID_OFFSET
        while True:
            yield from range(base, base + max(self.settings.slots * 4, 64))


def sandbox_error(message: str) -> Execution:
    """An infrastructure failure as a result: retry-safe, never the code's fault."""
    return Execution(status=Status.SANDBOX_ERROR, stderr=message)
