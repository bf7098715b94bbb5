"""The HTTP client trainers use to run code on codepool: micro-batched, bounded, retry-safe.

Concurrent ``execute`` calls are gathered into ``POST /v1/execute/batch`` requests (a batch
leaves when it is full or ``batch_window_s`` after its first item), at most
``max_in_flight_requests`` at a time. Every item carries an idempotency key that each retry
reuses; the service runs the first request with a key and answers repeats with its result
(``gateway/idempotency.py``), so nothing runs twice. Retried: items answered ``not_started``
or ``sandbox_error``, whole requests answered 429 (after ``Retry-After``) or 503, and requests
lost in transport (refused, reset, timed out: whether they ran or not, the key makes the
repeat safe). Not retried: other HTTP errors (a bad request stays bad) and malformed answers.
When retries run out the call raises :class:`ServiceError`: an infrastructure failure, never
something to show the policy as tool output.

The wire models are light frozen dataclasses rather than ``executor.jobs``: a trainer process
then loads nothing of the executor, and decoding 45,000 results per step costs no validation.
A test pins their fields and statuses to ``executor.jobs`` so the contract cannot drift.
No FastAPI import here.
"""

import asyncio
import logging
import random
import uuid
from collections.abc import Coroutine, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import httpx
import orjson

logger = logging.getLogger(__name__)

BATCH_PATH = "/v1/execute/batch"
STATUSES = frozenset(
    {
        "ok",
        "error",
        "timeout",
        "memory_limit",
        "output_limit",
        "killed",
        "not_started",
        "cancelled",
        "sandbox_error",
    }
)
RETRY_SAFE_STATUSES = frozenset({"not_started", "sandbox_error"})
# Statuses that say nothing about the code: never shown to a policy as its tool's output.
NO_VERDICT_STATUSES = RETRY_SAFE_STATUSES | {"cancelled"}
RETRY_SAFE_HTTP_CODES = frozenset({429, 503})


class ServiceError(Exception):
    """The service could not give a verdict for a call (retries exhausted, bad request, ...)."""


@dataclass(frozen=True, slots=True)
class ExecuteItem:
    """One call, as ``ExecuteRequest`` in the contract. ``None`` limits take server defaults."""

    code: str
    stdin: str = ""
    language: str = "python"
    timeout_s: float | None = None
    memory_mb: int | None = None
    files: Mapping[str, str] | None = None
    session_id: str | None = None
    idempotency_key: str | None = None
    deadline_s: float | None = None
    echo_last_expr: bool = False

    def to_wire(self) -> dict[str, Any]:
        """The JSON object sent for this item; unset optional fields are left out."""
        wire: dict[str, Any] = {"code": self.code, "language": self.language}
        if self.stdin:
            wire["stdin"] = self.stdin
        if self.files:
            wire["files"] = dict(self.files)
        if self.echo_last_expr:
            wire["echo_last_expr"] = True
        for name in ("timeout_s", "memory_mb", "session_id", "idempotency_key", "deadline_s"):
            value = getattr(self, name)
            if value is not None:
                wire[name] = value
        return wire


@dataclass(frozen=True, slots=True)
class ExecuteResult:
    """One result, as ``JobResult`` in the contract."""

    id: str
    status: str
    exit_code: int | None = None
    signal: str | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    queue_s: float = 0.0
    max_rss_bytes: int | None = None

    @classmethod
    def from_wire(cls, data: Mapping[str, Any]) -> "ExecuteResult":
        """Decodes a result object; unknown keys (newer servers) are ignored."""
        known = {name: data[name] for name in _RESULT_FIELDS if name in data}
        result = cls(**known)
        if result.status not in STATUSES:
            raise ServiceError(f"unknown result status {result.status!r}")
        return result


_RESULT_FIELDS = tuple(f.name for f in fields(ExecuteResult))


@dataclass(frozen=True)
class ClientSettings:
    """How the client batches and retries."""

    base_url: str
    max_batch_items: int = 256
    batch_window_s: float = 0.002
    max_in_flight_requests: int = 8
    max_attempts: int = 6
    backoff_initial_s: float = 0.05
    backoff_max_s: float = 5.0
    # Seconds the service has to answer one batch request; what has not started by then comes
    # back not_started and is retried. None: the service's default (600 s).
    call_deadline_s: float | None = None
    request_timeout_s: float = 300.0  # HTTP read limit when no call deadline is set
    deadline_grace_s: float = 30.0  # HTTP read limit = call deadline + this
    connect_timeout_s: float = 5.0
    auth_token: str | None = None  # sent as a bearer token when the service requires one


@dataclass
class ClientStats:
    """Counters since the client was opened."""

    requests_sent: int = 0
    items_sent: int = 0
    items_retried: int = 0
    requests_rate_limited: int = 0
    calls_failed: int = 0


@dataclass
class _Pending:
    item: ExecuteItem
    future: asyncio.Future[ExecuteResult]
    attempts: int = 0
    last_problem: str = ""


@dataclass
class _Batcher:
    queue: list[_Pending] = field(default_factory=list)
    flush_handle: asyncio.TimerHandle | None = None


class CodepoolClient:
    """Async client for ``/v1/execute/batch``. Use as ``async with CodepoolClient(...) as c``."""

    def __init__(
        self, settings: ClientSettings, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        self.stats = ClientStats()
        read_s = settings.request_timeout_s
        if settings.call_deadline_s is not None:
            read_s = settings.call_deadline_s + settings.deadline_grace_s
        timeout = httpx.Timeout(read_s, connect=settings.connect_timeout_s)
        limits = httpx.Limits(max_connections=settings.max_in_flight_requests)
        headers = {"authorization": f"Bearer {settings.auth_token}"} if settings.auth_token else {}
        self._http = httpx.AsyncClient(
            base_url=settings.base_url,
            timeout=timeout,
            limits=limits,
            headers=headers,
            transport=transport,
        )
        self._slots = asyncio.Semaphore(settings.max_in_flight_requests)
        self._batcher = _Batcher()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def __aenter__(self) -> "CodepoolClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def execute(self, item: ExecuteItem) -> ExecuteResult:
        """Runs one call; raises :class:`ServiceError` when the service gives no verdict."""
        if self._closed:
            raise ServiceError("client is closed")
        if item.idempotency_key is None:
            item = replace(item, idempotency_key=uuid.uuid4().hex)
        future: asyncio.Future[ExecuteResult] = asyncio.get_running_loop().create_future()
        self._enqueue(_Pending(item, future))
        return await future

    async def execute_many(self, items: Sequence[ExecuteItem]) -> list[ExecuteResult]:
        """Runs many calls concurrently; results in the order of ``items``."""
        return list(await asyncio.gather(*(self.execute(item) for item in items)))

    async def aclose(self) -> None:
        """Fails every call not yet answered, stops requests in flight, closes the connections."""
        self._closed = True
        self._cancel_flush()
        for pending in self._batcher.queue:
            _fail(pending, "client closed")
        self._batcher.queue.clear()
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._http.aclose()

    # --- micro-batching ------------------------------------------------------------------------

    def _enqueue(self, pending: _Pending) -> None:
        batcher = self._batcher
        batcher.queue.append(pending)
        if len(batcher.queue) >= self.settings.max_batch_items:
            self._flush()
        elif batcher.flush_handle is None:
            loop = asyncio.get_running_loop()
            batcher.flush_handle = loop.call_later(self.settings.batch_window_s, self._flush)

    def _cancel_flush(self) -> None:
        if self._batcher.flush_handle is not None:
            self._batcher.flush_handle.cancel()
            self._batcher.flush_handle = None

    def _flush(self) -> None:
        self._cancel_flush()
        queue = self._batcher.queue
        size = self.settings.max_batch_items
        while queue:
            batch, queue[:] = queue[:size], queue[size:]
            self._spawn(self._send(batch))

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task: asyncio.Task[None] = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- one request -----------------------------------------------------------------------------

    async def _send(self, batch: list[_Pending]) -> None:
        batch = [p for p in batch if not p.future.done()]  # callers may have given up
        if not batch:
            return
        try:
            await self._request(batch)
        except asyncio.CancelledError:  # the client is closing: nobody will answer these
            for pending in batch:
                _fail(pending, "client closed")
            raise

    async def _request(self, batch: list[_Pending]) -> None:
        envelope: dict[str, Any] = {"items": [p.item.to_wire() for p in batch]}
        if self.settings.call_deadline_s is not None:
            envelope["deadline_s"] = self.settings.call_deadline_s
        body = orjson.dumps(envelope)
        async with self._slots:
            self.stats.requests_sent += 1
            self.stats.items_sent += len(batch)
            try:
                response = await self._http.post(
                    BATCH_PATH, content=body, headers={"content-type": "application/json"}
                )
            except httpx.TransportError as exc:
                # Refused, or reset on a stale keep-alive connection, or timed out: it may have
                # run, but the idempotency keys make the repeat return that run's results.
                self._retry(batch, f"transport failed: {exc!r}", None)
                return
        self._handle_response(batch, response)

    def _handle_response(self, batch: list[_Pending], response: httpx.Response) -> None:
        if response.status_code in RETRY_SAFE_HTTP_CODES:
            self.stats.requests_rate_limited += response.status_code == 429
            delay_s = retry_after_s(response.headers.get("retry-after"))
            self._retry(batch, f"HTTP {response.status_code}", delay_s)
            return
        if response.status_code != 200:
            self._fail_all(batch, f"HTTP {response.status_code}: {response.text[:500]}")
            return
        try:
            wire_results = orjson.loads(response.content)["results"]
            results = [ExecuteResult.from_wire(r) for r in wire_results]
        except (orjson.JSONDecodeError, KeyError, TypeError, ServiceError) as exc:
            self._fail_all(batch, f"undecodable batch response: {exc!r}")
            return
        if len(results) != len(batch):
            self._fail_all(batch, f"{len(results)} results for {len(batch)} items")
            return
        retry = []
        for pending, result in zip(batch, results, strict=True):
            if result.status in RETRY_SAFE_STATUSES:
                retry.append(pending)
                pending.last_problem = f"status {result.status}: {result.stderr[-200:]}"
            elif not pending.future.done():
                pending.future.set_result(result)
        if retry:
            self._retry(retry, "", None)

    # --- retries ---------------------------------------------------------------------------------

    def _retry(self, batch: list[_Pending], problem: str, delay_s: float | None) -> None:
        again = []
        for pending in batch:
            pending.attempts += 1
            pending.last_problem = problem or pending.last_problem
            if pending.attempts >= self.settings.max_attempts:
                self._fail(pending, f"gave up after {pending.attempts} attempts")
            else:
                again.append(pending)
        if not again:
            return
        self.stats.items_retried += len(again)
        attempt = max(p.attempts for p in again)
        wait_s = delay_s if delay_s is not None else self._backoff_s(attempt)
        logger.info("retrying %d call(s) in %.3f s: %s", len(again), wait_s, problem)
        self._spawn(self._requeue_after(again, wait_s))

    async def _requeue_after(self, batch: list[_Pending], wait_s: float) -> None:
        try:
            await asyncio.sleep(wait_s)
        except asyncio.CancelledError:
            for pending in batch:
                _fail(pending, "client closed")
            raise
        for pending in batch:
            if self._closed:
                _fail(pending, "client closed")
            elif not pending.future.done():
                self._enqueue(pending)

    def _backoff_s(self, attempt: int) -> float:
        return backoff_s(attempt, self.settings.backoff_initial_s, self.settings.backoff_max_s)

    def _fail_all(self, batch: list[_Pending], problem: str) -> None:
        for pending in batch:
            self._fail(pending, problem)

    def _fail(self, pending: _Pending, problem: str) -> None:
        self.stats.calls_failed += 1
        logger.warning("call failed: %s (%s)", problem, pending.last_problem)
        _fail(pending, f"{problem} {pending.last_problem}".strip())


def _fail(pending: _Pending, message: str) -> None:
    if not pending.future.done():
        pending.future.set_exception(ServiceError(message))


def backoff_s(attempt: int, initial_s: float, max_s: float) -> float:
    """Exponential backoff for retry ``attempt`` (1, 2, ...), capped, with jitter (50-100%)."""
    return min(max_s, initial_s * 2.0**attempt) * (0.5 + random.random() / 2)


def retry_after_s(header: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header; ``None`` for absent or date-valued headers."""
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return None
