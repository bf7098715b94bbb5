"""The worker's heartbeat: a key with a TTL (liveness) and its entry in the workers hash."""

import time

import orjson
from redis.asyncio import Redis

from executor import keys


async def beat(redis: Redis, worker_id: str, slots: int, busy: int, ttl_s: float) -> None:
    """Announces this worker as alive with its slot counts."""
    info = orjson.dumps({"slots": slots, "busy": busy, "seen_s": time.time()})
    pipe = redis.pipeline(transaction=False)
    pipe.set(keys.worker_heartbeat(worker_id), info, px=int(ttl_s * 1000))
    pipe.hset(keys.WORKERS_HASH, worker_id, info)
    await pipe.execute()


async def forget(redis: Redis, worker_id: str) -> None:
    """Removes this worker's heartbeat on a clean exit."""
    pipe = redis.pipeline(transaction=False)
    pipe.delete(keys.worker_heartbeat(worker_id))
    pipe.hdel(keys.WORKERS_HASH, worker_id)
    await pipe.execute()


async def is_alive(redis: Redis, worker_id: str) -> bool:
    """True if the worker's heartbeat key exists (it expires when beats stop)."""
    return bool(await redis.exists(keys.worker_heartbeat(worker_id)))
