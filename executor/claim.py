"""Claiming jobs from the stream: as many as there are free slots, each with its batch's state."""

import logging
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import ValidationError
from redis.asyncio import Redis
from redis.exceptions import ResponseError

from executor import keys
from executor.jobs import QueuedJob

log = logging.getLogger(__name__)

Entry = tuple[bytes, dict[bytes, bytes] | None]


@dataclass
class Claimed:
    """One stream entry this worker now owns; ``job`` is None when the entry is malformed."""

    entry_id: bytes
    job: QueuedJob | None
    raw: bytes
    cancelled: bool = False
    problem: str = ""


def parse_entry(entry_id: bytes, fields: dict[bytes, bytes] | None) -> Claimed:
    """Decodes one entry; a malformed one keeps its raw bytes and says what is wrong."""
    raw = (fields or {}).get(keys.JOB_FIELD.encode(), b"")
    try:
        return Claimed(entry_id, QueuedJob.model_validate_json(raw), raw)
    except ValidationError as exc:
        return Claimed(entry_id, None, raw, problem=f"malformed job entry: {exc.errors()[:1]}")


async def ensure_group(redis: Redis) -> None:
    """Creates the stream and the consumer group if missing (after a Redis restart, say)."""
    try:
        # From id 0, so that jobs added before the group existed are delivered too.
        await redis.xgroup_create(keys.JOBS_STREAM, keys.WORKERS_GROUP, id="0", mkstream=True)
    except ResponseError as exc:
        if "BUSYGROUP" not in str(exc):
            raise


class Claimer:
    """Reads new jobs for one consumer of the workers group."""

    def __init__(self, redis: Redis, consumer: str, block_s: float) -> None:
        self.redis = redis
        self.consumer = consumer
        self.block_ms = int(block_s * 1000)

    async def claim(self, count: int) -> list[Claimed]:
        """Up to ``count`` new jobs, waiting at most the block time for the first."""
        try:
            reply: Any = await self.redis.xreadgroup(
                keys.WORKERS_GROUP,
                self.consumer,
                {keys.JOBS_STREAM: ">"},
                count=count,
                block=self.block_ms,
            )
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            log.warning("consumer group missing (Redis restarted?); creating it")
            await ensure_group(self.redis)
            return []
        entries: list[Entry] = reply[0][1] if reply else []
        return await self.annotate(entries)

    async def annotate(self, entries: list[Entry]) -> list[Claimed]:
        """Parses entries and marks those whose batch was cancelled (one MGET for all)."""
        claimed = [parse_entry(entry_id, fields) for entry_id, fields in entries]
        batch_ids = sorted({c.job.batch_id for c in claimed if c.job and c.job.batch_id})
        if not batch_ids:
            return claimed
        states = await self.redis.mget([keys.batch(b) for b in batch_ids])
        cancelled = {
            b for b, state in zip(batch_ids, states, strict=True)
            if state == keys.BATCH_CANCELLED.encode()
        }  # fmt: skip
        for item in claimed:
            item.cancelled = item.job is not None and item.job.batch_id in cancelled
        return claimed


def job_summary(raw: bytes) -> dict[str, Any]:
    """What can be read from a malformed entry: its id and reply stream, if present."""
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}
