"""Submitting jobs and collecting their results: admission, idempotency, enqueue, deadline."""

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NoReturn

from redis.exceptions import RedisError

from executor.jobs import ExecuteRequest, JobResult, Status
from gateway.dispatcher import Dispatcher
from gateway.errors import QueueLost, Rejected
from gateway.idempotency import Claim, Idempotency, WaitResult, stored_reply, vanished
from gateway.metrics import GatewayMetrics
from gateway.monitor import QueueMonitor
from gateway.pending import PendingResults, Reply
from gateway.plan import Window, queued_job
from gateway.settings import GatewaySettings

DEADLINE_MESSAGE = "codepool: no result before the deadline; the job did not start; safe to retry"
LOST_MESSAGE = "codepool: Redis lost this job (restart without persistence); safe to retry"


@dataclass
class Submission:
    """Jobs submitted together and the futures their results arrive on."""

    job_ids: list[str]
    futures: list["asyncio.Future[Reply] | asyncio.Future[WaitResult]"]
    deadline_mono_s: float
    started_mono_s: float = field(default_factory=time.monotonic)


class Submitter:
    """The one path from request items to results, shared by the native and code-judge APIs."""

    def __init__(
        self, settings: GatewaySettings, reply_to: str, pending: PendingResults,
        dispatcher: Dispatcher, idempotency: Idempotency, monitor: QueueMonitor,
        metrics: GatewayMetrics,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.reply_to = reply_to
        self.pending = pending
        self.dispatcher = dispatcher
        self.idempotency = idempotency
        self.monitor = monitor
        self.metrics = metrics

    def admit(self, count: int) -> None:
        """Raises Rejected when Redis is down or the queue would pass its configured depth."""
        state = self.monitor.state
        retry_after_s = self.settings.retry_after_s
        if not state.redis_ok:
            self._reject(Rejected(503, "redis_unavailable", "the queue is unavailable",
                                  retry_after_s))  # fmt: skip
        depth = state.in_system + self.monitor.enqueued_since_poll
        if depth + count > self.settings.max_queue_depth:
            message = (f"the queue holds {depth} jobs; {count} more would pass the limit of "
                       f"{self.settings.max_queue_depth}")  # fmt: skip
            self._reject(Rejected(429, "queue_full", message, retry_after_s))

    def _reject(self, exc: Rejected) -> NoReturn:
        self.metrics.rejections.labels(reason=exc.reason).inc()
        raise exc

    def window(self, deadline_s: float, start_within_s: float | None = None) -> Window:
        """The answer window of a request arriving now."""
        now_s = time.time()
        deadline_s = min(deadline_s, self.settings.max_deadline_s)
        return Window(now_s, now_s + deadline_s, self.settings.start_margin_s, start_within_s)

    async def submit(
        self, items: list[ExecuteRequest], window: Window, batch_id: str | None = None,
        single: bool = False,
    ) -> Submission:  # fmt: skip
        """Admits and enqueues ``items`` (FieldError / Rejected on bad input or overload)."""
        self.admit(len(items))
        limits = self.settings.sandbox
        jobs = [queued_job(item, self.reply_to, window, limits, batch_id,
                           [] if single else ["items", i])
                for i, item in enumerate(items)]  # fmt: skip
        futures: list[asyncio.Future[Reply] | asyncio.Future[WaitResult]] = []
        claims = _claims(items, [job.id for job in jobs])
        fresh = await self._reserve(items, claims, futures)
        payloads = [jobs[i].model_dump_json().encode() for i in fresh]
        for i in fresh:
            futures[i] = self.pending.add(jobs[i].id)
        try:
            await self.dispatcher.enqueue(payloads)
        except Rejected as exc:
            self.pending.discard([jobs[i].id for i in fresh])
            self.idempotency.abandon([claims[i] for i in fresh if i in claims])
            self._reject(exc)
        self.monitor.enqueued_since_poll += len(payloads)
        deadline_mono_s = time.monotonic() + (window.deadline_at_s - window.now_s)
        return Submission([job.id for job in jobs], futures, deadline_mono_s)

    async def _reserve(
        self, items: list[ExecuteRequest], claims: dict[int, Claim],
        futures: list["asyncio.Future[Reply] | asyncio.Future[WaitResult]"],
    ) -> list[int]:  # fmt: skip
        """Fills ``futures`` for repeats of earlier keys; returns the indices to enqueue."""
        loop = asyncio.get_running_loop()
        futures.extend(loop.create_future() for _ in items)
        if not claims:
            return list(range(len(items)))
        try:
            values = await self.idempotency.reserve(list(claims.values()))
        except (RedisError, OSError) as exc:
            # Some claims may have been taken before the failure.
            self.idempotency.abandon(list(claims.values()))
            error = Rejected(503, "redis_unavailable", str(exc), self.settings.retry_after_s)
            self._reject(error)
        repeats: dict[int, bytes] = {i: v for i, v in zip(claims, values, strict=True) if v}
        for i, value in repeats.items():
            reply = stored_reply(value)
            if reply is None:
                futures[i] = self.idempotency.wait(claims[i].client_key)
            else:
                futures[i].set_result(reply)
        return [i for i in range(len(items)) if i not in repeats]

    async def results(
        self, submission: Submission, lost_as_results: bool = False
    ) -> AsyncIterator[tuple[int, Reply]]:
        """(index, reply) in completion order; at the deadline, ``not_started`` for the rest.

        A QueueLost is raised, or with ``lost_as_results`` answered ``sandbox_error``.
        """
        done: asyncio.Queue[int] = asyncio.Queue()
        for index, future in enumerate(submission.futures):
            future.add_done_callback(partial(_put, done, index))
        remaining = set(range(len(submission.futures)))
        try:
            while remaining:
                next_index = await self._next_done(done, submission.deadline_mono_s)
                if next_index is None:
                    break
                remaining.discard(next_index)
                yield next_index, self._reply_of(submission, next_index, lost_as_results)
            for index in sorted(remaining):
                yield index, self._synthetic(submission, index, Status.NOT_STARTED,
                                             DEADLINE_MESSAGE)  # fmt: skip
        finally:
            self.pending.discard([submission.job_ids[i] for i in remaining])

    async def _next_done(self, done: "asyncio.Queue[int]", deadline_mono_s: float) -> int | None:
        if not done.empty():
            return done.get_nowait()
        timeout_s = deadline_mono_s - time.monotonic()
        if timeout_s <= 0:
            return None
        try:
            return await asyncio.wait_for(done.get(), timeout_s)
        except TimeoutError:
            return None

    def _reply_of(self, submission: Submission, index: int, lost_as_results: bool) -> Reply:
        try:
            reply = submission.futures[index].result()
        except QueueLost:
            if not lost_as_results:
                raise
            return self._synthetic(submission, index, Status.SANDBOX_ERROR, LOST_MESSAGE)
        if reply is None:
            reply = vanished(submission.job_ids[index])
        self.metrics.observe(reply, time.monotonic() - submission.started_mono_s)
        return reply

    def _synthetic(self, submission: Submission, index: int, status: Status, message: str) -> Reply:
        waited_s = time.monotonic() - submission.started_mono_s
        result = JobResult(id=submission.job_ids[index], status=status, stderr=message,
                           queue_s=waited_s)  # fmt: skip
        reply = Reply.of(result)
        self.metrics.observe(reply, waited_s)
        return reply


def _claims(items: list[ExecuteRequest], job_ids: list[str]) -> dict[int, Claim]:
    """Item index -> its claim, for the items with an idempotency key."""
    return {i: Claim(item.idempotency_key, job_ids[i])
            for i, item in enumerate(items) if item.idempotency_key}  # fmt: skip


def _put(done: "asyncio.Queue[int]", index: int, _: Any) -> None:
    done.put_nowait(index)
