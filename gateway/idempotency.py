"""Idempotency keys: the first request with a key runs; repeats get its result.

A key holds a claim naming its job while the first run is in flight, then the result (written
by the worker in the same MULTI as the reply). A retry-safe outcome (``not_started``,
``sandbox_error``) or a cancellation deletes the key, so that a retry runs the code. Repeats
that arrive while the first run is in flight wait: one task polls all their keys with MGET.

A claim whose job was never queued (Redis failed between the reservation and the enqueue) is
abandoned: the same task deletes it, retrying until Redis answers, or repeats would wait for a
first run that never comes. Only the claim itself is deleted, never another job's claim or a
result, so abandoning a claim that may not have been taken is safe.
"""

import asyncio
import logging
import time
from dataclasses import dataclass
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

# Deletes each key that still holds the claim given for it; a result or another claim stays.
RELEASE_CLAIMS_LUA = """
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then
    redis.call('DEL', key)
  end
end
return 0
"""


@dataclass(frozen=True)
class Claim:
    """A client's key reserved for one job, its first run."""

    client_key: str
    job_id: str

    @property
    def value(self) -> bytes:
        """What the key holds while the job is in flight."""
        return keys.idempotency_claim(self.job_id)


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
        # claim -> monotonic time after which its key has expired anyway
        self._abandoned: dict[Claim, float] = {}
        self._release_claims = redis.register_script(RELEASE_CLAIMS_LUA)
        self._wakeup = asyncio.Event()

    async def reserve(self, claims: list[Claim]) -> list[bytes | None]:
        """SET NX GET per claim: None where the claim now holds its key, else the key's value."""
        pipe = self.redis.pipeline(transaction=False)
        for claim in claims:
            pipe.set(keys.idempotency(claim.client_key), claim.value, nx=True, ex=self.ttl_s,
                     get=True)  # fmt: skip
        values: list[bytes | None] = await pipe.execute()
        # Our own claim comes back when a retried pipeline had taken the key the first time.
        return [None if v == c.value else v for v, c in zip(values, claims, strict=True)]

    def abandon(self, claims: list[Claim]) -> None:
        """Gives up claims whose jobs were never queued; ``run`` deletes them from Redis."""
        give_up_s = time.monotonic() + self.ttl_s
        for claim in claims:
            self._abandoned[claim] = give_up_s
        if claims:
            self._wakeup.set()

    def wait(self, key: str) -> "asyncio.Future[WaitResult]":
        """A future resolved with the first run's result once it is stored."""
        future: asyncio.Future[WaitResult] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(key, []).append(future)
        self._wakeup.set()
        return future

    async def run(self) -> None:
        """Releases abandoned claims and polls the keys being waited on, for the gateway's
        lifetime."""
        while True:
            if not self._waiting and not self._abandoned:
                self._wakeup.clear()
                await self._wakeup.wait()
            try:
                await self._release_abandoned()
                await self._poll()
            except (RedisError, OSError) as exc:
                log.warning("idempotency poll failed: %s", exc)
            await asyncio.sleep(POLL_INTERVAL_S)

    async def _release_abandoned(self) -> None:
        now_s = time.monotonic()
        self._abandoned = {c: give_up_s for c, give_up_s in self._abandoned.items()
                           if give_up_s > now_s}  # fmt: skip
        abandoned = list(self._abandoned)
        for start in range(0, len(abandoned), MGET_CHUNK):
            chunk = abandoned[start : start + MGET_CHUNK]
            await self._release_claims(keys=[keys.idempotency(c.client_key) for c in chunk],
                                       args=[c.value for c in chunk])  # fmt: skip
            for claim in chunk:
                self._abandoned.pop(claim, None)

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
