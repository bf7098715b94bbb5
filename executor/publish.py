"""Publishing results: reply, idempotency record and acknowledgement, atomically, in one call.

One Lua script does, for each result: XADD to the job's reply stream (and refresh its TTL),
record or clear the idempotency key, XACK and XDEL the job's entry. A script runs atomically,
like the MULTI it replaces, but is one command instead of eight: the worker spends a third of
the Python it spent per result building and parsing that transaction. The worker's
``Publisher`` also sends, in one call, every result that finished while the previous call was
in flight.
"""

import asyncio
import logging
import time
from typing import Any, NamedTuple

from redis.asyncio import Redis
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from executor import keys
from executor.jobs import JobResult, QueuedJob, Status

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.1
RETRY_MAX_S = 2.0
# After the deadline the gateway has answered already; keep trying a little for idempotency.
GIVE_UP_AFTER_DEADLINE_S = 30.0
MAX_RESULTS_PER_CALL = 64

# KEYS: the jobs stream, then per result its reply stream and its idempotency key.
# ARGV: the workers group, the reply TTL in seconds, then per result
#       entry id, job id, status, result JSON, idempotency action ("", "del" or "set").
PUBLISH_LUA = f"""
local group, ttl = ARGV[1], ARGV[2]
for i = 0, (#KEYS - 1) / 2 - 1 do
  local reply, idempotency, a = KEYS[2 + 2 * i], KEYS[3 + 2 * i], 3 + 5 * i
  redis.call('XADD', reply, '*', '{keys.REPLY_ID_FIELD}', ARGV[a + 1],
             '{keys.REPLY_STATUS_FIELD}', ARGV[a + 2], '{keys.REPLY_RESULT_FIELD}', ARGV[a + 3])
  redis.call('EXPIRE', reply, ttl)
  if ARGV[a + 4] == 'del' then
    redis.call('DEL', idempotency)
  elseif ARGV[a + 4] == 'set' then
    redis.call('SET', idempotency, '{keys.IDEMPOTENCY_RESULT_PREFIX.decode()}' .. ARGV[a + 3],
               'XX', 'KEEPTTL')
  end
  redis.call('XACK', KEYS[1], group, ARGV[a])
  redis.call('XDEL', KEYS[1], ARGV[a])
end
return (#KEYS - 1) / 2
"""


class Publication(NamedTuple):
    """A finished job: its stream entry, the job, and its result."""

    entry_id: bytes
    job: QueuedJob
    result: JobResult


def _idempotency_action(publication: Publication) -> str:
    if not publication.job.idempotency_key:
        return ""
    status = publication.result.status
    # A retry with the same key must run the code again.
    return "del" if status.retry_safe or status == Status.CANCELLED else "set"


async def publish_all(
    script: AsyncScript, publications: list[Publication], reply_ttl_s: int
) -> None:
    """Publishes and acknowledges ``publications`` in one atomic script call."""
    script_keys: list[Any] = [keys.JOBS_STREAM]
    args: list[Any] = [keys.WORKERS_GROUP, reply_ttl_s]
    for publication in publications:
        job = publication.job
        # Without a key the action is "" and the script never touches the placeholder name.
        script_keys += [job.reply_to, keys.idempotency(job.idempotency_key or "")]
        result = publication.result
        args += [publication.entry_id, job.id, result.status.value, result.model_dump_json(),
                 _idempotency_action(publication)]  # fmt: skip
    await script(keys=script_keys, args=args)


def publish_script(redis: Redis) -> AsyncScript:
    """The publishing script, bound to ``redis`` (loaded on first use, again after a restart)."""
    return redis.register_script(PUBLISH_LUA)


async def publish(
    redis: Redis, entry_id: bytes, job: QueuedJob, result: JobResult, reply_ttl_s: int
) -> None:
    """Sends ``result`` to the job's gateway and acknowledges (and deletes) its entry."""
    await publish_all(publish_script(redis), [Publication(entry_id, job, result)], reply_ttl_s)


class Publisher:
    """Publishes the worker's results; those that finish together share one script call."""

    def __init__(self, redis: Redis, reply_ttl_s: int) -> None:
        self.script = publish_script(redis)
        self.reply_ttl_s = reply_ttl_s
        self._queue: list[tuple[Publication, asyncio.Future[None]]] = []
        self._wakeup = asyncio.Event()

    async def publish(self, publication: Publication) -> None:
        """Returns once the result is published; raises the Redis error if that failed."""
        future = asyncio.get_running_loop().create_future()
        self._queue.append((publication, future))
        self._wakeup.set()
        await future

    async def run(self) -> None:
        """The sending loop; runs for the worker's lifetime."""
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._queue:
                taken = self._queue[:MAX_RESULTS_PER_CALL]
                del self._queue[:MAX_RESULTS_PER_CALL]
                await self._send(taken)

    async def _send(self, taken: list[tuple[Publication, "asyncio.Future[None]"]]) -> None:
        try:
            await publish_all(self.script, [p for p, _ in taken], self.reply_ttl_s)
        except Exception as exc:  # every waiter gets the error (and retries); the loop goes on
            for _, future in taken:
                if not future.done():
                    future.set_exception(exc)
            return
        for _, future in taken:
            if not future.done():
                future.set_result(None)

    async def publish_with_retry(self, publication: Publication) -> bool:
        """Publishes through a Redis outage; gives up (False) well after the job's deadline."""
        delay_s = RETRY_FIRST_S
        job = publication.job
        while True:
            try:
                await self.publish(publication)
                return True
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                if time.time() > job.deadline_at_s + GIVE_UP_AFTER_DEADLINE_S:
                    log.error("giving up publishing job %s: %s", job.id, exc)
                    return False
                log.warning("publishing job %s failed, retrying in %.1f s: %s",
                            job.id, delay_s, exc)  # fmt: skip
                await asyncio.sleep(delay_s)
                delay_s = min(RETRY_MAX_S, delay_s * 2)
