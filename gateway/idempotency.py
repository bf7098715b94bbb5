"""Idempotency keys: the first request with a key runs; repeats get its result.

A key holds ``pending`` while its first run is in flight, then the result (written by the
worker in the same MULTI as the reply). A retry-safe outcome (``not_started``,
``sandbox_error``) or a cancellation deletes the key, so that a retry runs the code. Repeats
that arrive while the first run is in flight wait: one task polls all their keys with MGET.
"""

import asyncio
import logging
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from executor.jobs import JobResult, Status
from gateway.pending import Reply

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.05
MGET_CHUNK = 1000


def stored_reply(value: bytes) -> Reply | None:
    """The stored result of a finished first run, or None while it is in flight."""
    if not value.startswith(keys.IDEMPOTENCY_RESULT_PREFIX):
        return None
    raw = value[len(keys.IDEMPOTENCY_RESULT_PREFIX) :]
    data = orjson.loads(raw)
    return Reply(str(data["id"]), Status(data["status"]), raw)


def vanished(job_id: str) -> Reply:
    """The first run ended retry-safe (or the key expired): tell the repeat to retry."""
    message = "codepool: the first request with this idempotency key did not run; retry"
    return Reply.of(JobResult(id=job_id, status=Status.NOT_STARTED, stderr=message))


WaitResult = Reply | None
"""The first run's result, or None if its key vanished (the repeat should retry)."""


class Idempotency:
    """Reserves keys for new work and waits on keys whose first run is in flight."""

    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self._waiting: dict[str, list[asyncio.Future[WaitResult]]] = {}
        self._wakeup = asyncio.Event()

    async def reserve(self, client_keys: list[str]) -> list[bytes | None]:
        """SET NX GET per key: None where this request now owns the key, else its value."""
        pipe = self.redis.pipeline(transaction=False)
        for key in client_keys:
            pipe.set(keys.idempotency(key), keys.IDEMPOTENCY_PENDING, nx=True, ex=self.ttl_s,
                     get=True)  # fmt: skip
        values: list[bytes | None] = await pipe.execute()
        return values

    async def release(self, client_keys: list[str]) -> None:
        """Frees keys whose work was never enqueued."""
        if client_keys:
            await self.redis.delete(*(keys.idempotency(k) for k in client_keys))

    def wait(self, key: str) -> "asyncio.Future[WaitResult]":
        """A future resolved with the first run's result once it is stored."""
        future: asyncio.Future[WaitResult] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        self._wakeup.set()
        return future

    async def run(self) -> None:
        """Polls the keys being waited on, for the gateway's lifetime."""
        while True:
            if not self._waiting:
                self._wakeup.clear()
                await self._wakeup.wait()
            try:
                await self._poll()
            except (RedisError, OSError) as exc:
                log.warning("idempotency poll failed: %s", exc)
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _poll(self) -> None:
        waited = list(self._waiting)
        for start in range(0, len(waited), MGET_CHUNK):
            chunk = waited[start : start + MGET_CHUNK]
            values: Any = await self.redis.mget([keys.idempotency(k) for k in chunk])
            for key, value in zip(chunk, values, strict=True):
                if value is None:
                    self._resolve(key, None)
                elif (reply := stored_reply(value)) is not None:
                    self._resolve(key, reply)

    def _resolve(self, key: str, reply: WaitResult) -> None:
        for future in self._waiting.pop(key, []):
            if not future.done():
                future.set_result(reply)
