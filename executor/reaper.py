"""Recovering the jobs of dead workers, and dead-lettering jobs that keep failing to finish.

Every live worker keeps its in-flight entries fresh (XCLAIM JUSTID resets their idle time
without counting a delivery), so an entry idle for ``reclaim_idle_s`` belongs to a worker that
died. The reaper claims such entries for its own worker, which runs them again; one delivered
``max_deliveries`` times is dead-lettered and answered ``sandbox_error`` instead.
"""

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from redis.asyncio import Redis

from executor import keys
from executor.claim import Claimed, Claimer, Entry, job_summary, parse_entry
from executor.jobs import JobResult, QueuedJob, Status
from executor.publish import publish

log = logging.getLogger(__name__)

SCAN_COUNT = 200
DEAD_LETTER_MAXLEN = 100_000


class Reaper:
    """One sweep finds idle pending entries; ``handle`` runs the ones this worker takes."""

    def __init__(
        self,
        claimer: Claimer,
        reclaim_idle_s: float,
        max_deliveries: int,
        reply_ttl_s: int,
        handle: Callable[[list[Claimed]], Awaitable[None]],
    ) -> None:
        self.claimer = claimer
        self.redis: Redis = claimer.redis
        self.min_idle_ms = int(reclaim_idle_s * 1000)
        self.max_deliveries = max_deliveries
        self.reply_ttl_s = reply_ttl_s
        self.handle = handle

    async def refresh(self, entry_ids: Iterable[bytes]) -> None:
        """Marks this worker's in-flight entries as alive (resets their idle time)."""
        ids: list[Any] = list(entry_ids)
        if ids:
            await self.redis.xclaim(
                keys.JOBS_STREAM, keys.WORKERS_GROUP, self.claimer.consumer, 0, ids, justid=True
            )

    async def sweep(self, free_slots: int) -> tuple[int, int]:
        """Takes over idle entries (up to ``free_slots``); returns (reclaimed, dead-lettered)."""
        pending: list[dict[str, Any]] = await self.redis.xpending_range(
            keys.JOBS_STREAM, keys.WORKERS_GROUP, "-", "+", SCAN_COUNT, idle=self.min_idle_ms
        )
        dead = [p["message_id"] for p in pending if p["times_delivered"] >= self.max_deliveries]
        retry = [p["message_id"] for p in pending if p["times_delivered"] < self.max_deliveries]
        dead_count = await self._dead_letter(await self._take(dead)) if dead else 0
        retry = retry[:free_slots]
        if not retry:
            return 0, dead_count
        claimed = await self.claimer.annotate(await self._take(retry))
        if claimed:
            log.warning("reclaimed %d job(s) from dead workers", len(claimed))
            await self.handle(claimed)
        return len(claimed), dead_count

    async def _take(self, entry_ids: list[Any]) -> list[Entry]:
        # XCLAIM with a minimum idle time: of two reapers racing, only one gets each entry.
        entries: Any = await self.redis.xclaim(
            keys.JOBS_STREAM, keys.WORKERS_GROUP, self.claimer.consumer, self.min_idle_ms,
            entry_ids,
        )  # fmt: skip
        gone = [entry_id for entry_id, fields in entries if fields is None]
        if gone:  # deleted from the stream but still pending: nothing left to run
            await self.redis.xack(keys.JOBS_STREAM, keys.WORKERS_GROUP, *gone)
        return [(entry_id, fields) for entry_id, fields in entries if fields is not None]

    async def _dead_letter(self, entries: list[Entry]) -> int:
        for entry_id, fields in entries:
            claimed = parse_entry(entry_id, fields)
            await dead_letter(self.redis, claimed, "delivered too many times", self.reply_ttl_s)
        return len(entries)


async def dead_letter(redis: Redis, claimed: Claimed, reason: str, reply_ttl_s: int) -> None:
    """Keeps the entry in the dead-letter stream and answers its caller ``sandbox_error``."""
    log.error("dead-lettering entry %r: %s", claimed.entry_id, reason)
    await redis.xadd(
        keys.DEAD_LETTER_STREAM,
        {keys.JOB_FIELD: claimed.raw, "reason": reason, "at_s": str(time.time())},
        maxlen=DEAD_LETTER_MAXLEN,
        approximate=True,
    )
    job = claimed.job or _salvage(claimed.raw)
    if job is None:
        await redis.xack(keys.JOBS_STREAM, keys.WORKERS_GROUP, claimed.entry_id)
        await redis.xdel(keys.JOBS_STREAM, claimed.entry_id)
        return
    result = JobResult(id=job.id, status=Status.SANDBOX_ERROR, stderr=f"codepool: {reason}")
    await publish(redis, claimed.entry_id, job, result, reply_ttl_s)


def _salvage(raw: bytes) -> QueuedJob | None:
    """A stand-in job carrying only the id and reply stream of a malformed entry, if readable."""
    summary = job_summary(raw)
    job_id, reply_to = summary.get("id"), summary.get("reply_to")
    if not isinstance(job_id, str) or not isinstance(reply_to, str):
        return None
    if not reply_to.startswith(keys.reply_stream("")):
        return None
    now_s = time.time()
    return QueuedJob(
        id=job_id, reply_to=reply_to, code="", timeout_s=0.0, memory_mb=0,
        enqueued_at_s=now_s, start_by_s=now_s, deadline_at_s=now_s,
    )  # fmt: skip
