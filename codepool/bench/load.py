"""The asyncio load generator of ``codepool bench http``: singles, batches, code-judge calls.

Each function sends ``calls`` copies of one snippet and returns a Measurement; an item counts as
an error unless it ran and ended ``ok`` (a refused request, a lost item, or any other status).
"""

import asyncio
import time
from collections.abc import Callable

import httpx
import orjson

from codepool.bench.rawhttp import Connection, RawHttpError
from codepool.bench.stats import Measurement

Advance = Callable[[int], None]
NDJSON = "application/x-ndjson"
BATCH_DEADLINE_S = 3600.0


async def singles(
    url: str, token: str | None, label: str, code: str, calls: int, concurrency: int,
    advance: Advance, pause_s: float = 0.0,
) -> Measurement:  # fmt: skip
    """``calls`` POST /v1/execute, ``concurrency`` at a time, each runner on its own connection.

    With ``pause_s`` each runner waits that long after an answer before its next call.
    """
    latencies: list[float] = []
    errors = 0
    remaining = iter(range(calls))
    body = orjson.dumps({"code": code})

    async def runner() -> None:
        nonlocal errors
        connection = Connection(url, token)
        try:
            for _ in remaining:
                started = time.perf_counter()
                ok = await _one(connection, body)
                latencies.append(time.perf_counter() - started)
                errors += not ok
                advance(1)
                if pause_s:
                    await asyncio.sleep(pause_s)
        finally:
            await connection.close()

    started = time.perf_counter()
    await asyncio.gather(*(runner() for _ in range(concurrency)))
    return Measurement(label, calls, time.perf_counter() - started, latencies, errors)


async def _one(connection: Connection, body: bytes) -> bool:
    try:
        status, answer = await connection.post("/v1/execute", body)
    except (OSError, asyncio.IncompleteReadError, RawHttpError):
        return False
    return status == 200 and orjson.loads(answer).get("status") == "ok"


async def batch(
    client: httpx.AsyncClient, label: str, code: str, calls: int, advance: Advance
) -> Measurement:
    """One POST /v1/execute/batch, streamed as NDJSON; latency = request start to its line."""
    # The longest deadline the gateway allows by default: a slow host must not lose items.
    body = orjson.dumps({"items": [{"code": code}] * calls, "deadline_s": BATCH_DEADLINE_S})
    headers = {"Accept": NDJSON, "Content-Type": "application/json"}
    latencies: list[float] = []
    seen: set[int] = set()
    errors = 0
    started = time.perf_counter()
    try:
        async with client.stream("POST", "/v1/execute/batch", content=body,
                                 headers=headers) as response:  # fmt: skip
            if response.status_code != 200:
                await response.aread()
                raise httpx.HTTPStatusError(response.text[:200], request=response.request,
                                            response=response)  # fmt: skip
            async for line in response.aiter_lines():
                if not line:
                    continue
                item = orjson.loads(line)
                latencies.append(time.perf_counter() - started)
                seen.add(item["index"])
                errors += item["status"] != "ok"
                advance(1)
    except httpx.HTTPError:
        pass
    lost = calls - len(seen)  # never answered: counted as errors
    return Measurement(label, calls, time.perf_counter() - started, latencies, errors + lost)


async def codejudge(
    client: httpx.AsyncClient, label: str, code: str, calls: int, chunk: int, concurrency: int,
    advance: Advance,
) -> Measurement:  # fmt: skip
    """POST /run/long-batch in chunks, as rStar2-Agent's client does (for any code-judge peer)."""
    latencies: list[float] = []
    errors = 0
    sizes = [min(chunk, calls - start) for start in range(0, calls, chunk)]
    queue = iter(sizes)

    async def runner() -> None:
        nonlocal errors
        for size in queue:
            body = {"type": "batch", "submissions": [{"type": "python", "solution": code}] * size}
            sent = time.perf_counter()
            try:
                response = await client.post("/run/long-batch", json=body)
                results = response.json()["results"] if response.status_code == 200 else []
            except (httpx.HTTPError, ValueError, KeyError):
                results = []
            latencies.extend([time.perf_counter() - sent] * size)
            errors += size - sum(1 for r in results if r.get("run_success"))
            advance(size)

    started = time.perf_counter()
    await asyncio.gather(*(runner() for _ in range(concurrency)))
    return Measurement(label, calls, time.perf_counter() - started, latencies, errors)


async def fresh_interpreters(
    python: str, label: str, code: str, calls: int, runners: int, advance: Advance
) -> Measurement:
    """The peer's execution model: ``runners`` loops, each starting ``python -c code`` per call."""
    latencies: list[float] = []
    errors = 0
    remaining = iter(range(calls))

    async def runner() -> None:
        nonlocal errors
        for _ in remaining:
            started = time.perf_counter()
            proc = await asyncio.create_subprocess_exec(
                python, "-c", code,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            errors += await proc.wait() != 0
            latencies.append(time.perf_counter() - started)
            advance(1)

    started = time.perf_counter()
    await asyncio.gather(*(runner() for _ in range(runners)))
    return Measurement(label, calls, time.perf_counter() - started, latencies, errors)
