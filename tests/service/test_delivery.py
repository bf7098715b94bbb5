"""Nothing lost, nothing answered twice: killed workers, Redis restarts, dead letters, drains."""

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from executor import keys
from executor.jobs import QueuedJob
from tests.service.stack import GatewayThread, RedisServer, Workers, gateway_settings

pytestmark = pytest.mark.timeout(120)
FAST_RECLAIM = {
    "CODEPOOL_RECLAIM_IDLE_S": "1.5",
    "CODEPOOL_CLAIM_BLOCK_S": "0.3",
    "CODEPOOL_HEARTBEAT_INTERVAL_S": "0.3",
}


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def workers(redis_server: RedisServer) -> Iterator[Workers]:
    pool = Workers(redis_server.url, env=FAST_RECLAIM)
    yield pool
    pool.stop_all()


@pytest.fixture
def gateway(redis_server: RedisServer) -> Iterator[GatewayThread]:
    thread = GatewayThread(gateway_settings(redis_server.url)).start()
    yield thread
    thread.stop()


def pending_of(server: RedisServer, consumer: str) -> int:
    entries = server.client().xpending_range(
        keys.JOBS_STREAM, keys.WORKERS_GROUP, "-", "+", 1000, consumername=consumer
    )
    return len(entries)


async def test_killed_worker_jobs_are_reclaimed_and_answered_once(
    redis_server: RedisServer, workers: Workers, gateway: GatewayThread
) -> None:
    victim = workers.start(0)
    for index in (1, 2):
        workers.start(index)
    workers.wait_alive(3)
    items = [{"code": f"import time; time.sleep(0.2); print({i})"} for i in range(500)]
    async with httpx.AsyncClient(base_url=gateway.url, timeout=110) as client:
        batch = asyncio.create_task(client.post("/v1/execute/batch", json={"items": items}))
        await asyncio.sleep(2.0)
        assert pending_of(redis_server, "test-0") > 0  # it holds jobs when it dies
        victim.send_signal(signal.SIGKILL)
        response = await batch
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["ok"] * 500
    assert [r["stdout"] for r in results] == [f"{i}\n" for i in range(500)]
    assert len({r["id"] for r in results}) == 500
    client_redis = redis_server.client()
    assert client_redis.xlen(keys.JOBS_STREAM) == 0  # every entry acknowledged and deleted
    assert pending_of(redis_server, "test-0") == 0


async def test_redis_restart_answers_503_or_completes_and_recovers(
    redis_server: RedisServer, workers: Workers, gateway: GatewayThread
) -> None:
    workers.start(0)
    workers.wait_alive(1)
    items = [{"code": "import time; time.sleep(0.3); print(1)"}] * 30
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        batch = asyncio.create_task(
            client.post("/v1/execute/batch", json={"items": items, "deadline_s": 20})
        )
        await asyncio.sleep(0.6)
        started = time.monotonic()
        redis_server.stop(signal.SIGKILL)
        redis_server.start()
        response = await batch
        # Redis came back empty: the queued jobs are gone, so the batch cannot complete. The
        # gateway notices the loss at its next poll and answers at once, not at the deadline.
        assert time.monotonic() - started < 5
        assert response.status_code == 503, response.text
        assert response.json()["reason"] == "queue_lost"
        assert "retry-after" in response.headers
        deadline = time.monotonic() + 30
        while True:  # the gateway and the worker reconnect by themselves
            after = await client.post(
                "/v1/execute", json={"code": "print(2)", "timeout_s": 1, "deadline_s": 5}
            )
            if after.status_code == 200 and after.json()["status"] == "ok":
                break
            assert time.monotonic() < deadline, after.text
            await asyncio.sleep(0.5)
    assert after.json()["stdout"] == "2\n"


async def test_failed_enqueue_answers_503_at_once_and_strands_no_retry(
    redis_server: RedisServer, workers: Workers, gateway: GatewayThread
) -> None:
    workers.start(0)
    workers.wait_alive(1)
    admin = redis_server.client()
    key = f"enqueue-fails-{time.time_ns()}"
    single = {"code": "print(1)", "idempotency_key": key, "deadline_s": 20}
    # Two items with one key: the second is a repeat of the first.
    twice = {"code": "print(2)", "idempotency_key": f"{key}-twice"}
    batch = {"items": [twice, twice], "deadline_s": 20}
    async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as client:
        # Redis takes the keys' reservations, then refuses the enqueue (XADD) and the
        # release of the reservations (DEL), for real: the calls cannot run.
        admin.execute_command("ACL", "SETUSER", "default", "-xadd", "-del")
        try:
            started = time.monotonic()
            refused = [
                await client.post("/v1/execute", json=single),
                await client.post("/v1/execute/batch", json=batch),
            ]
            assert time.monotonic() - started < 4
        finally:
            admin.execute_command("ACL", "SETUSER", "default", "+@all")
        for response in refused:
            assert response.status_code == 503, response.text
            assert response.json()["reason"] == "redis_unavailable"
            assert response.headers["retry-after"]
        # Retried as the client does (503 and not_started are safe to retry), the calls run:
        # nothing waits for a first run that was never queued.
        ran = await retry_until_ran(client, "/v1/execute", single, budget_s=5)
        ran_batch = await retry_until_ran(client, "/v1/execute/batch", batch, budget_s=5)
    assert (ran["status"], ran["stdout"]) == ("ok", "1\n")
    assert [(r["status"], r["stdout"]) for r in ran_batch["results"]] == [("ok", "2\n")] * 2
    assert admin.get(keys.idempotency(key)).startswith(keys.IDEMPOTENCY_RESULT_PREFIX)


async def retry_until_ran(
    client: httpx.AsyncClient, path: str, body: dict[str, Any], budget_s: float
) -> dict[str, Any]:
    """Posts ``body`` until every call in it ran (no 503, no not_started), within ``budget_s``."""
    deadline = time.monotonic() + budget_s
    while True:
        try:
            response = await client.post(path, json=body, timeout=budget_s)
        except httpx.ReadTimeout:
            pytest.fail(f"a retry was not answered within {budget_s} s")
        answer: dict[str, Any] = response.json()
        results = answer.get("results", [answer])
        if response.status_code == 200 and all(r["status"] != "not_started" for r in results):
            return answer
        assert time.monotonic() < deadline, f"still refused after {budget_s} s: {answer}"
        await asyncio.sleep(0.1)


def _queued(reply_to: str) -> bytes:
    now_s = time.time()
    job = QueuedJob(
        id="dead-1",
        reply_to=reply_to,
        code="print(1)",
        timeout_s=1,
        memory_mb=64,
        enqueued_at_s=now_s,
        start_by_s=now_s + 60,
        deadline_at_s=now_s + 90,
    )
    return job.model_dump_json().encode()


def test_job_delivered_too_often_is_dead_lettered(
    redis_server: RedisServer, workers: Workers
) -> None:
    client = redis_server.client()
    client.xgroup_create(keys.JOBS_STREAM, keys.WORKERS_GROUP, id="0", mkstream=True)
    reply_to = keys.reply_stream("test")
    client.xadd(keys.JOBS_STREAM, {keys.JOB_FIELD: _queued(reply_to)})
    # A consumer that takes the job and dies without answering.
    client.xreadgroup(keys.WORKERS_GROUP, "ghost", {keys.JOBS_STREAM: ">"}, count=1)
    client.xadd(keys.JOBS_STREAM, {keys.JOB_FIELD: b"not json"})
    workers.start(0, CODEPOOL_MAX_DELIVERIES="1")
    deadline = time.monotonic() + 30
    while client.xlen(keys.DEAD_LETTER_STREAM) < 2:
        assert time.monotonic() < deadline, "nothing was dead-lettered"
        time.sleep(0.1)
    ((_, fields),) = client.xrange(reply_to)
    result = orjson.loads(fields[keys.REPLY_RESULT_FIELD.encode()])
    assert (result["id"], result["status"]) == ("dead-1", "sandbox_error")
    assert client.xlen(keys.JOBS_STREAM) == 0
    assert client.xpending(keys.JOBS_STREAM, keys.WORKERS_GROUP)["pending"] == 0


async def test_sigterm_drains_in_flight_jobs(
    redis_server: RedisServer, workers: Workers, gateway: GatewayThread
) -> None:
    worker = workers.start(0)
    workers.wait_alive(1)
    async with httpx.AsyncClient(base_url=gateway.url, timeout=60) as client:
        job = asyncio.create_task(
            client.post("/v1/execute", json={"code": "import time; time.sleep(1.5); print('done')"})
        )
        await asyncio.sleep(0.7)
        worker.send_signal(signal.SIGTERM)
        result = (await job).json()
    assert (result["status"], result["stdout"]) == ("ok", "done\n")
    assert worker.wait(timeout=20) == 0
    assert redis_server.client().hlen(keys.WORKERS_HASH) == 0


def test_worker_check_reports_its_heartbeat(redis_server: RedisServer, workers: Workers) -> None:
    workers.start(0)
    workers.wait_alive(1)

    def check(worker_id: str) -> int:
        argv = [
            sys.executable,
            "-m",
            "codepool",
            "worker",
            "--check",
            "--worker-id",
            worker_id,
            "--redis-url",
            redis_server.url,
        ]
        return subprocess.run(argv, timeout=30).returncode

    assert check("test-0") == 0
    assert check("test-nobody") == 1


def test_gateway_without_redis_is_not_ready_and_answers_503(tmp_path: Path) -> None:
    thread = GatewayThread(gateway_settings(f"unix://{tmp_path}/none.sock")).start()
    try:
        assert httpx.get(f"{thread.url}/healthz").status_code == 200
        assert httpx.get(f"{thread.url}/readyz").status_code == 503
        response = httpx.post(f"{thread.url}/v1/execute", json={"code": "1"})
        assert response.status_code == 503
        assert response.headers["retry-after"]
        cancel = httpx.delete(f"{thread.url}/v1/batches/some-batch")
        assert cancel.status_code == 503, cancel.text
        assert (cancel.json()["reason"], cancel.headers["retry-after"]) == (
            "redis_unavailable",
            "1",
        )
    finally:
        thread.stop()


def test_gateway_creates_the_consumer_group_before_any_worker(
    redis_server: RedisServer, gateway: GatewayThread
) -> None:
    groups = redis_server.client().xinfo_groups(keys.JOBS_STREAM)
    assert [g["name"] for g in groups] == [keys.WORKERS_GROUP.encode()]
    assert groups[0]["lag"] == 0  # what KEDA's lagCount trigger reads
