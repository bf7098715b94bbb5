"""Publishing a result: reply, idempotency record, acknowledgement, all in one MULTI."""

import asyncio
import logging
import time

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from executor import keys
from executor.jobs import JobResult, QueuedJob, Status

log = logging.getLogger(__name__)

RETRY_FIRST_S = 0.1
RETRY_MAX_S = 2.0
# After the deadline the gateway has answered already; keep trying a little for idempotency.
GIVE_UP_AFTER_DEADLINE_S = 30.0


async def publish(
    redis: Redis, entry_id: bytes, job: QueuedJob, result: JobResult, reply_ttl_s: int
) -> None:
    """Sends ``result`` to the job's gateway and acknowledges (and deletes) its entry."""
    pipe = redis.pipeline(transaction=True)
    pipe.xadd(
        job.reply_to,
        {
            keys.REPLY_ID_FIELD: job.id,
            keys.REPLY_STATUS_FIELD: result.status.value,
            keys.REPLY_RESULT_FIELD: result.model_dump_json(),
        },
    )
    pipe.expire(job.reply_to, reply_ttl_s)
    if job.idempotency_key:
        key = keys.idempotency(job.idempotency_key)
        if result.status.retry_safe or result.status == Status.CANCELLED:
            pipe.delete(key)  # a retry with the same key must run the code
        else:
            value = keys.IDEMPOTENCY_RESULT_PREFIX + result.model_dump_json().encode()
            pipe.set(key, value, xx=True, keepttl=True)
    pipe.xack(keys.JOBS_STREAM, keys.WORKERS_GROUP, entry_id)
    pipe.xdel(keys.JOBS_STREAM, entry_id)
    await pipe.execute()


async def publish_with_retry(
    redis: Redis, entry_id: bytes, job: QueuedJob, result: JobResult, reply_ttl_s: int
) -> bool:
    """Publishes through a Redis outage; gives up (False) well after the job's deadline."""
    delay_s = RETRY_FIRST_S
    while True:
        try:
            await publish(redis, entry_id, job, result, reply_ttl_s)
            return True
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            if time.time() > job.deadline_at_s + GIVE_UP_AFTER_DEADLINE_S:
                log.error("giving up publishing job %s: %s", job.id, exc)
                return False
            log.warning("publishing job %s failed, retrying in %.1f s: %s", job.id, delay_s, exc)
            await asyncio.sleep(delay_s)
            delay_s = min(RETRY_MAX_S, delay_s * 2)
