"""The queue monitor: polls depth, pending, workers, and notices when Redis lost its data."""

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys

log = logging.getLogger(__name__)

MARKER_TTL_S = 3600


@dataclass(frozen=True)
class QueueState:
    """What the gateway knows about the queue, as of ``updated_s`` (monotonic)."""

    redis_ok: bool = False
    depth: int = 0
    pending: int = 0
    workers: int = 0
    slots: int = 0
    busy_slots: int = 0
    updated_s: float = 0.0

    @property
    def in_system(self) -> int:
        """Jobs queued or running."""
        return self.depth + self.pending


def _workers(raw: dict[bytes, bytes], stale_s: float) -> tuple[int, int, int, list[bytes]]:
    """(live workers, their slots, busy slots, ids of long-dead workers to forget)."""
    now_s = time.time()
    live = slots = busy = 0
    forget: list[bytes] = []
    for worker_id, blob in raw.items():
        info = orjson.loads(blob)
        age_s = now_s - float(info.get("seen_s", 0))
        if age_s <= stale_s:
            live, slots, busy = live + 1, slots + int(info["slots"]), busy + int(info["busy"])
        elif age_s > stale_s * 20:
            forget.append(worker_id)
    return live, slots, busy, forget


class QueueMonitor:
    """Keeps ``state`` fresh; calls ``on_data_lost`` when this gateway's marker key vanishes."""

    def __init__(
        self,
        redis: Redis,
        gateway_id: str,
        worker_stale_s: float,
        on_data_lost: Callable[[], None],
    ) -> None:
        self.redis = redis
        self.marker = keys.gateway_marker(gateway_id)
        self.worker_stale_s = worker_stale_s
        self.on_data_lost = on_data_lost
        self.state = QueueState()
        self.enqueued_since_poll = 0
        self._marker_set = False

    async def run(self, interval_s: float) -> None:
        """Polls every ``interval_s`` for the gateway's lifetime."""
        while True:
            await self.poll()
            await asyncio.sleep(interval_s)

    async def poll(self) -> QueueState:
        """One poll; a Redis failure marks the state as not ok."""
        try:
            self.state = await self._read()
        except (RedisError, OSError) as exc:
            if self.state.redis_ok:
                log.warning("Redis unreachable: %s", exc)
            self.state = QueueState(redis_ok=False, updated_s=time.monotonic())
        self.enqueued_since_poll = 0
        return self.state

    async def _read(self) -> QueueState:
        pipe = self.redis.pipeline(transaction=False)
        pipe.xlen(keys.JOBS_STREAM)
        pipe.xinfo_groups(keys.JOBS_STREAM)
        pipe.hgetall(keys.WORKERS_HASH)
        pipe.set(self.marker, b"1", ex=MARKER_TTL_S, get=True)
        length, groups, workers_raw, marker = await pipe.execute(raise_on_error=False)
        for item in (length, workers_raw):
            if isinstance(item, Exception):
                raise item
        self._check_marker(marker)
        pending = _pending(groups)
        live, slots, busy, forget = _workers(workers_raw, self.worker_stale_s)
        if forget:
            await self.redis.hdel(keys.WORKERS_HASH, *forget)
        return QueueState(True, max(0, int(length) - pending), pending, live, slots, busy,
                          time.monotonic())  # fmt: skip

    def _check_marker(self, previous: object) -> None:
        if isinstance(previous, Exception):
            raise previous
        if previous is None and self._marker_set:
            log.error("Redis lost its data (restarted without persistence?)")
            self.on_data_lost()
        self._marker_set = True


def _pending(groups: object) -> int:
    """Entries delivered to the workers group and not yet acknowledged."""
    if isinstance(groups, Exception) or not isinstance(groups, list):
        return 0  # no stream yet
    for group in groups:
        name = group.get("name")
        if name in (keys.WORKERS_GROUP, keys.WORKERS_GROUP.encode()):
            return int(group.get("pending", 0))
    return 0
