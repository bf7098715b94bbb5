"""Deadlines, backpressure, idempotency, cancellation and auth, against the real stack."""

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from tests.service.conftest import Stack
from tests.service.stack import GatewayThread, gateway_settings

pytestmark = pytest.mark.timeout(90)
SLOTS = 8  # two workers of four


@pytest.fixture
def client(stack: Stack) -> Iterator[httpx.AsyncClient]:
    yield httpx.AsyncClient(base_url=stack.url, timeout=60)


async def occupy_slots(client: httpx.AsyncClient, seconds: float) -> "asyncio.Task[httpx.Response]":
    """Fills every slot with a sleeper; returns the task of that batch."""
    items = [{"code": f"import time; time.sleep({seconds})"}] * SLOTS
    task = asyncio.create_task(client.post("/v1/execute/batch", json={"items": items}))
    await asyncio.sleep(0.5)  # let the workers claim them
    return task


async def test_job_that_cannot_start_in_time_is_not_started(client: httpx.AsyncClient) -> None:
    busy = await occupy_slots(client, 3.0)
    started = time.monotonic()
    response = await client.post(
        "/v1/execute", json={"code": "print(1)", "timeout_s": 0.5, "deadline_s": 2.0}
    )
    waited_s = time.monotonic() - started
    result = response.json()
    assert result["status"] == "not_started"
    assert waited_s < 2.0 + 0.5  # answered by its deadline, not after the sleepers
    assert (await busy).status_code == 200


async def test_full_queue_answers_429_with_retry_after(stack: Stack) -> None:
    settings = gateway_settings(stack.redis.url, max_queue_depth=12, max_batch_items=12)
    small = GatewayThread(settings).start()
    try:
        async with httpx.AsyncClient(base_url=small.url, timeout=60) as client:
            items = [{"code": "import time; time.sleep(1.5)"}] * 12
            first = asyncio.create_task(client.post("/v1/execute/batch", json={"items": items}))
            await asyncio.sleep(0.3)
            refused = await client.post("/v1/execute", json={"code": "print(1)"})
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["reason"] == "queue_full"
            assert all(r["status"] == "ok" for r in (await first).json()["results"])
            metrics = (await client.get("/metrics")).text
            assert 'codepool_rejections_total{reason="queue_full"} 1.0' in metrics
    finally:
        small.stop()


async def test_many_more_callers_than_redis_connections_all_complete(stack: Stack) -> None:
    # Every keyed call borrows a pooled connection to reserve its key: 128 callers share 3,
    # and must queue for one rather than be refused (or stranded).
    callers = 128
    settings = gateway_settings(stack.redis.url, redis_max_connections=3)
    small = GatewayThread(settings).start()
    try:
        limits = httpx.Limits(max_connections=callers)
        async with httpx.AsyncClient(base_url=small.url, timeout=60, limits=limits) as client:
            calls = [
                client.post(
                    "/v1/execute",
                    json={"code": "print(1)", "idempotency_key": f"pool-{time.time_ns()}-{i}"},
                )
                for i in range(callers)
            ]
            responses = await asyncio.wait_for(asyncio.gather(*calls), timeout=60)
    finally:
        small.stop()
    assert [r.status_code for r in responses] == [200] * callers, [
        r.text for r in responses if r.status_code != 200
    ][:3]
    assert {(r.json()["status"], r.json()["stdout"]) for r in responses} == {("ok", "1\n")}


async def test_repeated_idempotency_key_returns_the_first_result(
    client: httpx.AsyncClient,
) -> None:
    item = {
        "code": "import time, random; time.sleep(0.3); print(random.random())",
        "idempotency_key": f"key-{time.time_ns()}",
    }
    first, second = await asyncio.gather(
        client.post("/v1/execute", json=item), client.post("/v1/execute", json=item)
    )
    later = await client.post("/v1/execute", json=item)
    results = [r.json() for r in (first, second, later)]
    assert results[0]["status"] == "ok"
    assert {r["id"] for r in results} == {results[0]["id"]}
    assert {r["stdout"] for r in results} == {results[0]["stdout"]}
    other = await client.post("/v1/execute", json={**item, "idempotency_key": "another"})
    assert other.json()["stdout"] != results[0]["stdout"]


async def test_cancel_stops_what_has_not_started(client: httpx.AsyncClient) -> None:
    batch_id = f"cancel-{time.time_ns()}"
    items = [{"code": "import time; time.sleep(0.5); print('ran')"}] * 40
    task = asyncio.create_task(
        client.post("/v1/execute/batch", json={"items": items, "batch_id": batch_id})
    )
    await asyncio.sleep(0.4)
    cancel = await client.delete(f"/v1/batches/{batch_id}")
    assert cancel.status_code == 202
    results = (await task).json()["results"]
    statuses = [r["status"] for r in results]
    assert len(statuses) == 40
    assert set(statuses) <= {"ok", "cancelled"}
    assert statuses.count("cancelled") >= 20
    assert all(r["stdout"] == "ran\n" for r in results if r["status"] == "ok")
    assert (await client.delete("/v1/batches/no-such-batch")).status_code == 404


async def test_batch_id_in_use_is_refused(client: httpx.AsyncClient) -> None:
    body = {"items": [{"code": "1"}], "batch_id": f"dup-{time.time_ns()}"}
    assert (await client.post("/v1/execute/batch", json=body)).status_code == 200
    again = await client.post("/v1/execute/batch", json=body)
    assert again.status_code == 422
    assert again.json()["detail"][0]["loc"] == ["body", "batch_id"]


async def test_bearer_token_when_configured(stack: Stack) -> None:
    settings = gateway_settings(stack.redis.url, auth_token=SecretStr("s3cret"))
    guarded = GatewayThread(settings).start()
    try:
        async with httpx.AsyncClient(base_url=guarded.url, timeout=30) as client:
            body = {"code": "print(1)"}
            assert (await client.post("/v1/execute", json=body)).status_code == 401
            wrong = {"Authorization": "Bearer nope"}
            assert (await client.post("/v1/execute", json=body, headers=wrong)).status_code == 401
            right = {"Authorization": "Bearer s3cret"}
            response = await client.post("/v1/execute", json=body, headers=right)
            assert response.json()["stdout"] == "1\n"
            assert (await client.get("/healthz")).status_code == 200
            assert (await client.post("/run", json={"solution": "1"})).status_code == 401
    finally:
        guarded.stop()


def test_status_reports_workers_and_slots(stack: Stack) -> None:
    status = httpx.get(f"{stack.url}/v1/status").json()
    assert status["redis_ok"] is True
    assert (status["workers"], status["slots"]) == (2, SLOTS)
    assert httpx.get(f"{stack.url}/readyz").status_code == 200


async def leave_early(client: httpx.AsyncClient, body: dict[str, object], accept: str) -> None:
    """Sends the batch and hangs up: after one streamed line, or on a 1 s read timeout."""
    try:
        async with client.stream(
            "POST", "/v1/execute/batch", json=body, headers={"Accept": accept}
        ) as response:
            async for _ in response.aiter_lines():
                return  # closing the stream closes the connection
    except httpx.ReadTimeout:
        return


@pytest.mark.parametrize("accept", ["application/json", "application/x-ndjson"])
async def test_client_that_leaves_cancels_its_batch(stack: Stack, accept: str) -> None:
    batch_id = f"gone-{time.time_ns()}"
    items = [{"code": "import time; time.sleep(0.5)"}] * 60
    async with httpx.AsyncClient(base_url=stack.url, timeout=1.0) as client:
        await leave_early(client, {"items": items, "batch_id": batch_id}, accept)
    redis = stack.redis.client()
    deadline = time.monotonic() + 10
    while redis.get(f"cp:v1:batch:{batch_id}") != b"cancelled":
        assert time.monotonic() < deadline, "the batch was not cancelled"
        await asyncio.sleep(0.1)
    while redis.xlen("cp:v1:jobs") > 0:  # the rest is answered without running
        assert time.monotonic() < deadline, "cancelled jobs still queued"
        await asyncio.sleep(0.1)
