"""The HTTP client against scripted HTTP answers: batching, bounds, retries, failures.

The real service is exercised in tests/trainer/test_integration_service.py; these tests pin the
client's own decisions, which a healthy service rarely provokes (429, 503, retry-safe statuses).
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import fields

import httpx
import orjson
import pytest

from executor.jobs import ExecuteRequest, JobResult, Status
from gateway.client import (
    NO_VERDICT_STATUSES,
    RETRY_SAFE_STATUSES,
    STATUSES,
    ClientSettings,
    CodepoolClient,
    ExecuteItem,
    ExecuteResult,
    ServiceError,
)
from gateway.session_client import SessionClient, SessionClientSettings

Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def result(status: str = "ok", stdout: str = "") -> dict[str, object]:
    return {"id": "j", "status": status, "exit_code": 0, "stdout": stdout}


def make_client(handler: Handler, **overrides: float) -> tuple[CodepoolClient, list[list[dict]]]:
    seen: list[list[dict]] = []

    async def record(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/v1/execute/batch"
        seen.append(orjson.loads(request.content)["items"])
        return await handler(request)

    settings = ClientSettings(base_url="http://codepool", backoff_initial_s=0.001, **overrides)  # type: ignore[arg-type]
    return CodepoolClient(settings, transport=httpx.MockTransport(record)), seen


async def echo(request: httpx.Request) -> httpx.Response:
    items = orjson.loads(request.content)["items"]
    return httpx.Response(200, json={"results": [result(stdout=i["code"]) for i in items]})


def test_wire_models_match_the_contract() -> None:
    assert {f.name for f in fields(ExecuteItem)} == set(ExecuteRequest.model_fields)
    assert {f.name for f in fields(ExecuteResult)} == set(JobResult.model_fields)
    assert set(STATUSES) == {s.value for s in Status}
    assert set(RETRY_SAFE_STATUSES) == {s.value for s in Status if s.retry_safe}
    assert {"cancelled"} == NO_VERDICT_STATUSES - RETRY_SAFE_STATUSES
    wire = ExecuteItem("1", stdin="x", timeout_s=2.0, idempotency_key="k").to_wire()
    assert ExecuteRequest.model_validate(wire).timeout_s == 2.0


async def test_concurrent_calls_share_one_batch_in_order() -> None:
    client, seen = make_client(echo)
    async with client:
        results = await client.execute_many([ExecuteItem(f"print({i})") for i in range(10)])
    assert [r.stdout for r in results] == [f"print({i})" for i in range(10)]
    assert len(seen) == 1
    keys = [item["idempotency_key"] for item in seen[0]]
    assert len(set(keys)) == 10


async def test_batches_are_capped_and_requests_bounded() -> None:
    in_flight = 0
    peak = 0

    async def slow(request: httpx.Request) -> httpx.Response:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.02)
        in_flight -= 1
        return await echo(request)

    client, seen = make_client(slow, max_batch_items=4, max_in_flight_requests=2)
    async with client:
        results = await client.execute_many([ExecuteItem(str(i)) for i in range(20)])
    assert [r.stdout for r in results] == [str(i) for i in range(20)]
    assert [len(batch) for batch in seen] == [4] * 5
    assert peak == 2


async def test_retry_safe_items_are_resent_with_the_same_key() -> None:
    calls = 0

    async def first_not_started(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        items = orjson.loads(request.content)["items"]
        statuses = ["ok", "not_started", "sandbox_error"] if calls == 1 else ["ok"] * len(items)
        return httpx.Response(200, json={"results": [result(s) for s in statuses[: len(items)]]})

    client, seen = make_client(first_not_started)
    async with client:
        results = await client.execute_many([ExecuteItem(str(i)) for i in range(3)])
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert sorted(i["code"] for i in seen[1]) == ["1", "2"]
    first_keys = {i["code"]: i["idempotency_key"] for i in seen[0]}
    assert all(first_keys[i["code"]] == i["idempotency_key"] for i in seen[1])
    assert client.stats.items_retried == 2


async def test_429_honours_retry_after_then_succeeds() -> None:
    calls = 0

    async def limited_once(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return httpx.Response(429, headers={"retry-after": "0.05"})
        return await echo(request)

    client, seen = make_client(limited_once)
    async with client:
        started = asyncio.get_running_loop().time()
        out = await client.execute(ExecuteItem("x"))
        waited_s = asyncio.get_running_loop().time() - started
    assert out.stdout == "x"
    assert waited_s >= 0.05
    assert client.stats.requests_rate_limited == 1
    assert seen[0][0]["idempotency_key"] == seen[1][0]["idempotency_key"]


async def test_503_and_transport_failures_are_retried_until_attempts_run_out() -> None:
    async def unavailable(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503)

    client, seen = make_client(unavailable, max_attempts=3)
    async with client:
        with pytest.raises(ServiceError, match="gave up after 3 attempts"):
            await client.execute(ExecuteItem("x"))
    assert len(seen) == 3

    async def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client, seen = make_client(refused, max_attempts=2)
    async with client:
        with pytest.raises(ServiceError, match="transport failed"):
            await client.execute(ExecuteItem("x"))
    assert len(seen) == 2


@pytest.mark.parametrize("error", [httpx.ReadError, httpx.RemoteProtocolError, httpx.ReadTimeout])
async def test_a_request_lost_after_sending_is_repeated_with_the_same_keys(
    error: type[httpx.TransportError],
) -> None:
    calls = 0

    async def lost_once(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise error("connection reset", request=request)
        return await echo(request)

    client, seen = make_client(lost_once)
    async with client:
        results = await client.execute_many([ExecuteItem("a"), ExecuteItem("b")])
    assert [r.stdout for r in results] == ["a", "b"]
    assert [i["idempotency_key"] for i in seen[0]] == [i["idempotency_key"] for i in seen[1]]


@pytest.mark.parametrize("kind", ["bad_request", "server_error", "short_batch"])
async def test_failures_a_repeat_would_not_fix_are_not_retried(kind: str) -> None:
    async def fail(request: httpx.Request) -> httpx.Response:
        if kind == "server_error":
            return httpx.Response(500, text="boom")
        if kind == "short_batch":
            return httpx.Response(200, json={"results": []})
        return httpx.Response(422, json={"detail": "code: field required"})

    client, seen = make_client(fail)
    async with client:
        with pytest.raises(ServiceError):
            await client.execute(ExecuteItem("x"))
    assert len(seen) == 1
    assert client.stats.calls_failed == 1


async def test_a_call_deadline_goes_in_the_batch_envelope() -> None:
    bodies: list[dict[str, object]] = []

    async def keep(request: httpx.Request) -> httpx.Response:
        bodies.append(orjson.loads(request.content))
        return await echo(request)

    settings = ClientSettings(base_url="http://codepool", call_deadline_s=42.0)
    async with CodepoolClient(settings, transport=httpx.MockTransport(keep)) as client:
        await client.execute(ExecuteItem("x"))
    assert bodies[0]["deadline_s"] == 42.0


async def test_closing_fails_calls_in_flight_at_once() -> None:
    async def never(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(60)
        raise AssertionError("unreachable")

    client, _ = make_client(never)
    call = asyncio.ensure_future(client.execute(ExecuteItem("x")))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(client.aclose(), 5)
    with pytest.raises(ServiceError, match="closed"):
        await call


async def test_closed_client_refuses_calls() -> None:
    client, _ = make_client(echo)
    await client.aclose()
    with pytest.raises(ServiceError, match="closed"):
        await client.execute(ExecuteItem("x"))


async def test_bearer_token_is_sent_when_configured() -> None:
    seen: list[str | None] = []

    async def check(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return await echo(request)

    settings = ClientSettings(base_url="http://codepool", auth_token="s3cret")
    client = CodepoolClient(settings, transport=httpx.MockTransport(check))
    async with client:
        await client.execute(ExecuteItem("x"))
    assert seen == ["Bearer s3cret"]


async def test_session_client_retries_a_busy_create_after_retry_after() -> None:
    calls: list[float] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        calls.append(asyncio.get_running_loop().time())
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "0"}, json={"detail": "busy"})
        return httpx.Response(201, json={"id": "s1"})

    # Without the header the first wait would be backoff: 0.5 s x 2 x jitter = 0.5-1 s.
    settings = SessionClientSettings("http://codepool", backoff_initial_s=0.5)
    http = httpx.AsyncClient(base_url=settings.base_url, transport=httpx.MockTransport(answer))
    async with SessionClient(settings, http) as sessions:
        assert await sessions.create() == "s1"
    assert len(calls) == 2
    assert calls[1] - calls[0] < 0.4  # Retry-After: 0 was honoured, not the backoff
