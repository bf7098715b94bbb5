"""The native API end to end: real gateway, real Redis, real workers, real nsjail."""

import asyncio
import time
from collections.abc import Iterator

import httpx
import orjson
import pytest

from executor import keys
from tests.service.conftest import Stack
from tests.service.stack import GatewayThread, gateway_settings

pytestmark = pytest.mark.timeout(120)


def expected_status(i: int) -> str:
    """Item i of the mixed batch: mostly ok, some errors, a few timeouts."""
    return "timeout" if i % 500 == 7 else "error" if i % 10 == 3 else "ok"


def mixed_item(i: int) -> dict[str, object]:
    status = expected_status(i)
    if status == "timeout":
        return {"code": "while True: pass", "timeout_s": 0.5}
    if status == "error":
        return {"code": f"raise SystemExit({i % 7 + 1})"}
    return {"code": f"print({i} * 3)"}


def test_batch_of_2000_returns_in_order_with_correct_statuses(stack: Stack) -> None:
    items = [mixed_item(i) for i in range(2000)]
    response = httpx.post(f"{stack.url}/v1/execute/batch", json={"items": items}, timeout=110)
    assert response.status_code == 200
    body = response.json()
    results = body["results"]
    assert len(results) == 2000
    assert len({r["id"] for r in results}) == 2000
    for i, result in enumerate(results):
        assert result["status"] == expected_status(i), (i, result)
        if result["status"] == "ok":
            assert result["stdout"] == f"{i * 3}\n"
        if result["status"] == "error":
            assert result["exit_code"] == i % 7 + 1
    assert response.headers["x-batch-id"] == body["batch_id"]


def test_read_replies_are_trimmed_from_the_reply_stream(stack: Stack) -> None:
    items = [{"code": f"print({i})"} for i in range(50)]
    response = httpx.post(f"{stack.url}/v1/execute/batch", json={"items": items}, timeout=60)
    assert response.status_code == 200
    stream = keys.reply_stream(stack.gateway.app.state.services.gateway_id)
    redis = stack.redis.client()
    deadline = time.monotonic() + 5  # trimmed within the trim interval, or once quiet
    while redis.xlen(stream) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert redis.exists(stream) and redis.xlen(stream) == 0


async def test_singles_at_concurrency_64(stack: Stack) -> None:
    limit = asyncio.Semaphore(64)

    async def one(client: httpx.AsyncClient, i: int) -> dict[str, object]:
        async with limit:
            response = await client.post("/v1/execute", json={"code": f"print({i})"})
            assert response.status_code == 200
            result: dict[str, object] = response.json()
            return result

    async with httpx.AsyncClient(
        base_url=stack.url, timeout=60, limits=httpx.Limits(max_connections=64)
    ) as client:
        results = await asyncio.gather(*(one(client, i) for i in range(320)))
    assert [r["stdout"] for r in results] == [f"{i}\n" for i in range(320)]
    assert all(r["status"] == "ok" for r in results)


def test_ndjson_streams_every_result_with_its_index(stack: Stack) -> None:
    items = [
        {"code": f"import time; time.sleep({0.3 if i == 0 else 0}); print({i})"} for i in range(20)
    ]
    lines = []
    with httpx.stream(
        "POST",
        f"{stack.url}/v1/execute/batch",
        json={"items": items},
        headers={"Accept": "application/x-ndjson"},
        timeout=60,
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [orjson.loads(line) for line in response.iter_lines() if line]
    assert sorted(line["index"] for line in lines) == list(range(20))
    assert all(line["stdout"] == f"{line['index']}\n" for line in lines)
    assert lines[-1]["index"] == 0  # the slow one came last: streamed as completed


def test_result_fields_follow_the_contract(stack: Stack) -> None:
    result = httpx.post(
        f"{stack.url}/v1/execute", json={"code": "import sys; print('x'); sys.exit(3)"}
    ).json()
    for name in (
        "id",
        "status",
        "exit_code",
        "signal",
        "stdout",
        "stderr",
        "stdout_truncated",
        "stderr_truncated",
        "wall_s",
        "cpu_s",
        "queue_s",
        "max_rss_bytes",
    ):
        assert name in result
    assert (result["status"], result["exit_code"], result["stdout"]) == ("error", 3, "x\n")


def test_stdin_files_and_echo(stack: Stack) -> None:
    item = {
        "code": "print(input()[::-1]); print(open('data/a.txt').read())\n6*7",
        "stdin": "abc\n",
        "files": {"data/a.txt": "hello"},
        "echo_last_expr": True,
    }
    result = httpx.post(f"{stack.url}/v1/execute", json=item).json()
    assert result["stdout"] == "cba\nhello\n42\n"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"code": 5}, "code"),
        ({}, "code"),
        ({"code": "1", "language": "cobol"}, "language"),
        ({"code": "1", "timeout_s": -1}, "timeout_s"),
        ({"code": "1", "memory_mb": "lots"}, "memory_mb"),
        ({"code": "x" * (64 * 1024 + 1)}, "code"),
        ({"code": "1", "files": {"../etc/passwd": "x"}}, "files"),
        ({"code": "1", "files": {"/abs": "x"}}, "files"),
        ({"code": "1", "session_id": "s1"}, "session_id"),
        ({"code": "1", "deadline_s": 1.0}, "deadline_s"),
        ({"code": "1", "surprise": True}, "surprise"),
    ],
)
def test_bad_single_names_the_field(stack: Stack, body: dict[str, object], field: str) -> None:
    response = httpx.post(f"{stack.url}/v1/execute", json=body)
    assert response.status_code == 422, response.text
    assert any(field in [str(part) for part in err["loc"]] for err in response.json()["detail"])


def test_invalid_json_and_nan_are_4xx(stack: Stack) -> None:
    headers = {"content-type": "application/json"}
    broken = httpx.post(f"{stack.url}/v1/execute", content=b'{"code": ', headers=headers)
    assert broken.status_code == 422
    nan = httpx.post(
        f"{stack.url}/v1/execute", content=b'{"code": "1", "timeout_s": NaN}', headers=headers
    )
    assert 400 <= nan.status_code < 500


def test_bad_batch_names_the_item(stack: Stack) -> None:
    items = [{"code": "1"}, {"code": "1"}, {"code": 7}]
    response = httpx.post(f"{stack.url}/v1/execute/batch", json={"items": items})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][:3] == ["body", "items", 2]
    too_many = httpx.post(f"{stack.url}/v1/execute/batch", json={"items": [{"code": "1"}] * 5001})
    assert too_many.status_code == 422
    assert too_many.json()["detail"][0]["loc"] == ["body", "items"]
    empty = httpx.post(f"{stack.url}/v1/execute/batch", json={"items": []})
    assert empty.status_code == 422


def test_timeouts_and_memory_are_clamped_not_rejected(stack: Stack) -> None:
    result = httpx.post(
        f"{stack.url}/v1/execute",
        json={"code": "print(1)", "timeout_s": 1e9, "memory_mb": 10**9, "deadline_s": 30},
    ).json()
    assert result["status"] == "ok"


def chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """``body`` as a stream: httpx sends it chunked, without Content-Length."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.parametrize("chunked", [False, True])
def test_body_over_the_limit_is_refused_413(stack: Stack, chunked: bool) -> None:
    small = GatewayThread(gateway_settings(stack.redis.url, max_body_bytes=4096)).start()
    try:
        url = f"{small.url}/v1/execute"
        headers = {"content-type": "application/json"}
        big = orjson.dumps({"code": "#" * 5000 + "\nprint(1)"})
        fits = orjson.dumps({"code": "#" * 3000 + "\nprint(1)"})
        if chunked:
            refused = httpx.post(url, content=chunks(big), headers=headers)
            answered = httpx.post(url, content=chunks(fits), headers=headers, timeout=30)
        else:
            refused = httpx.post(url, content=big, headers=headers)
            answered = httpx.post(url, content=fits, headers=headers, timeout=30)
    finally:
        small.stop()
    assert refused.status_code == 413, refused.text
    assert refused.json()["reason"] == "too_large"
    assert (answered.json()["status"], answered.json()["stdout"]) == ("ok", "1\n")
