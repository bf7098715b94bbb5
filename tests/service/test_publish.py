"""Publishing results: one script call answers, records and acknowledges each job at once."""

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from executor import keys
from executor.claim import ensure_group
from executor.jobs import JobResult, QueuedJob, Status
from executor.publish import PUBLISH_LUA, Publication, Publisher, publish_all, publish_script
from executor.redis_client import connect
from tests.service.stack import RedisServer

REPLIES = keys.reply_stream("test-gateway")


@pytest.fixture
async def redis(redis_server: RedisServer) -> AsyncIterator[Redis]:
    client = connect(redis_server.url)
    await client.flushall()
    await ensure_group(client)
    yield client
    await client.aclose()


def queued(job_id: str, idempotency_key: str | None = None) -> QueuedJob:
    now_s = time.time()
    return QueuedJob(
        id=job_id, reply_to=REPLIES, code="print(1)", timeout_s=1.0, memory_mb=64,
        enqueued_at_s=now_s, start_by_s=now_s + 10, deadline_at_s=now_s + 20,
        idempotency_key=idempotency_key,
    )  # fmt: skip


async def claim(redis: Redis, jobs: list[QueuedJob]) -> list[bytes]:
    """Enqueues ``jobs`` and claims them as worker "w"; returns their entry ids."""
    for job in jobs:
        await redis.xadd(keys.JOBS_STREAM, {keys.JOB_FIELD: job.model_dump_json()})
    reply: Any = await redis.xreadgroup(
        keys.WORKERS_GROUP, "w", {keys.JOBS_STREAM: ">"}, count=len(jobs)
    )
    return [entry_id for entry_id, _ in reply[0][1]]


async def test_one_call_answers_records_and_acknowledges_every_result(redis: Redis) -> None:
    jobs = [queued("a", "key-kept"), queued("b", "key-dropped"), queued("c")]
    entry_ids = await claim(redis, jobs)
    for key, job_id in (("key-kept", "a"), ("key-dropped", "b")):
        await redis.set(keys.idempotency(key), keys.idempotency_claim(job_id), ex=60)
    results = [
        JobResult(id="a", status=Status.OK, stdout="1\n"),
        JobResult(id="b", status=Status.SANDBOX_ERROR),  # retry-safe: a retry must run again
        JobResult(id="c", status=Status.ERROR),
    ]
    publications = [Publication(*row) for row in zip(entry_ids, jobs, results, strict=True)]

    await publish_all(publish_script(redis), publications, reply_ttl_s=60)

    replies = await redis.xrange(REPLIES)
    fields = [(f[b"id"], f[b"s"]) for _, f in replies]
    assert fields == [(b"a", b"ok"), (b"b", b"sandbox_error"), (b"c", b"error")]
    assert JobResult.model_validate_json(replies[0][1][b"r"]).stdout == "1\n"
    assert 0 < await redis.ttl(REPLIES) <= 60
    kept = await redis.get(keys.idempotency("key-kept"))
    assert kept.startswith(keys.IDEMPOTENCY_RESULT_PREFIX)
    assert JobResult.model_validate_json(kept[len(keys.IDEMPOTENCY_RESULT_PREFIX) :]).id == "a"
    assert await redis.exists(keys.idempotency("key-dropped")) == 0
    assert await redis.xlen(keys.JOBS_STREAM) == 0
    assert (await redis.xpending(keys.JOBS_STREAM, keys.WORKERS_GROUP))["pending"] == 0


async def script_calls(redis: Redis) -> int:
    stats: Any = await redis.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


async def test_results_that_finish_together_share_one_call(redis: Redis) -> None:
    jobs = [queued(f"job-{i}") for i in range(5)]
    entry_ids = await claim(redis, jobs)
    await redis.script_load(PUBLISH_LUA)
    publisher = Publisher(redis, reply_ttl_s=60)
    sender = asyncio.create_task(publisher.run())
    calls_before = await script_calls(redis)
    try:
        await asyncio.gather(*(
            publisher.publish(Publication(entry_id, job, JobResult(id=job.id, status=Status.OK)))
            for entry_id, job in zip(entry_ids, jobs, strict=True)
        ))  # fmt: skip
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
    assert await script_calls(redis) - calls_before == 1
    assert await redis.xlen(REPLIES) == 5
    assert (await redis.xpending(keys.JOBS_STREAM, keys.WORKERS_GROUP))["pending"] == 0
