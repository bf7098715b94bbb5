"""The enqueue micro-batcher: concurrent requests share one XADD script call per flush."""

import asyncio
import logging
import time
from collections import deque

from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from gateway.errors import Rejected

log = logging.getLogger(__name__)

BUSY_WINDOW = 10  # lingers: flushes closer together than this mean requests are streaming in

# One command for a whole flush: Redis runs the XADDs; the client packs one command and parses
# one integer. The same flush as a pipeline of XADDs cost the gateway ~0.2 s of CPU per 1,000
# jobs (redis-py packs and parses each command in Python): a batch's first jobs waited for it.
ENQUEUE_LUA = f"""
for i = 1, #ARGV do
  redis.call('XADD', KEYS[1], '*', '{keys.JOB_FIELD}', ARGV[i])
end
return #ARGV
"""


class Dispatcher:
    """One task flushes everything queued so far as one script call of at most ``max_items``."""

    def __init__(self, redis: Redis, max_items: int, linger_s: float, retry_after_s: int):
        self.redis = redis
        self.max_items = max_items
        self.linger_s = linger_s
        self.retry_after_s = retry_after_s
        self._queue: deque[tuple[list[bytes], asyncio.Future[None]]] = deque()
        self._queued_items = 0
        self._wakeup = asyncio.Event()
        self._last_flush_s = 0.0
        self._enqueue = redis.register_script(ENQUEUE_LUA)

    async def enqueue(self, payloads: list[bytes]) -> None:
        """Adds jobs to the stream; raises Rejected (503) if Redis is unreachable."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[None]] = []
        for start in range(0, len(payloads), self.max_items):
            chunk = payloads[start : start + self.max_items]
            future: asyncio.Future[None] = loop.create_future()
            self._queue.append((chunk, future))
            self._queued_items += len(chunk)
            futures.append(future)
        self._wakeup.set()
        await asyncio.gather(*futures)

    async def run(self) -> None:
        """The flusher loop; runs for the gateway's lifetime.

        Under load (a flush in the last ``BUSY_WINDOW`` lingers) it waits ``linger_s`` for more
        items to share the round trip; an idle gateway flushes at once, for latency.
        """
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup.clear()
                busy = time.monotonic() - self._last_flush_s < self.linger_s * BUSY_WINDOW
                if busy and self._queued_items < self.max_items:
                    await asyncio.sleep(self.linger_s)
                while self._queue:
                    self._last_flush_s = time.monotonic()
                    await self._flush(*self._take())
        finally:  # stopped (shutdown): nobody will flush what is still queued
            while self._queue:
                _, futures = self._take()
                self._fail(futures, "the gateway is shutting down")

    def _take(self) -> tuple[list[bytes], list[asyncio.Future[None]]]:
        payloads: list[bytes] = []
        futures: list[asyncio.Future[None]] = []
        while self._queue and len(payloads) + len(self._queue[0][0]) <= self.max_items:
            chunk, future = self._queue.popleft()
            payloads += chunk
            futures.append(future)
        if not payloads:  # a single chunk is never larger than max_items, but be safe
            chunk, future = self._queue.popleft()
            payloads, futures = chunk, [future]
        self._queued_items -= len(payloads)
        return payloads, futures

    async def _flush(self, payloads: list[bytes], futures: list[asyncio.Future[None]]) -> None:
        try:
            await self._enqueue(keys=[keys.JOBS_STREAM], args=payloads)
        except (RedisError, OSError) as exc:
            log.warning("enqueue of %d job(s) failed: %s", len(payloads), exc)
            self._fail(futures, f"the queue is unavailable: {exc}")
            return
        except Exception:  # a bug must not strand the waiters, nor end this task
            log.exception("enqueue of %d job(s) failed", len(payloads))
            self._fail(futures, "the queue is unavailable")
            return
        for future in futures:
            if not future.done():
                future.set_result(None)

    def _fail(self, futures: list[asyncio.Future[None]], message: str) -> None:
        error = Rejected(503, "redis_unavailable", message, self.retry_after_s)
        for future in futures:
            if not future.done():
                future.set_exception(error)
