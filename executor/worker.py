"""The worker process: claim jobs for free slots, run them in the sandbox, publish, repeat.

Claim -> run -> publish are separate modules (``claim``, ``run``, ``publish``); this one only
schedules them, keeps the heartbeat, sweeps for dead peers' jobs and drains on SIGTERM.
"""

import asyncio
import contextlib
import logging
import signal
import uuid
from functools import partial
from typing import Any

from prometheus_client import start_http_server
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import heartbeat
from executor.claim import Claimed, Claimer, ensure_group
from executor.jobs import JobResult, QueuedJob, Status
from executor.pool import SlotPool
from executor.publish import Publication, Publisher
from executor.reaper import Reaper, dead_letter
from executor.redis_client import connect
from executor.run import execute
from executor.session_service import SessionService
from executor.sessions import SessionManager
from executor.settings import SandboxSettings, SessionSettings
from executor.worker_metrics import WorkerMetrics
from executor.worker_settings import WorkerSettings

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0


class Worker:
    """One worker: a slot pool fed from the job stream. ``stop()`` drains it."""

    def __init__(
        self, settings: WorkerSettings, sandbox: SandboxSettings,
        sessions: SessionSettings | None = None,
    ) -> None:  # fmt: skip
        self.settings = settings
        self.sandbox = sandbox
        self.slots = sandbox.slots
        self.redis: Redis = connect(settings.redis_url)
        self.metrics = WorkerMetrics.create(busy=self._busy, idle=self._idle)
        self.pool = SlotPool(sandbox, on_slot_start=self.metrics.sandbox_start_seconds.observe)
        self.claimer = Claimer(self.redis, settings.worker_id, settings.claim_block_s)
        self.publisher = Publisher(self.redis, settings.reply_ttl_s)
        self.reaper = Reaper(
            self.claimer, settings.reclaim_idle_s, settings.max_deliveries,
            settings.reply_ttl_s, self._reclaimed,
        )  # fmt: skip
        session_settings = sessions or SessionSettings()
        self.incarnation = uuid.uuid4().hex  # sessions die with this process: the gateway checks
        self.sessions = (
            SessionManager(sandbox, session_settings) if session_settings.enabled else None
        )
        self.session_calls = (
            None if self.sessions is None
            else SessionService(self.redis, settings.worker_id, self.sessions, settings.reply_ttl_s)
        )  # fmt: skip
        self._inflight: dict[bytes, asyncio.Task[None]] = {}
        self._slot_freed = asyncio.Event()
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()

    def stop(self) -> None:
        """Stops claiming; jobs already claimed finish and are acknowledged."""
        self._stopping.set()
        self._slot_freed.set()

    async def run(self) -> None:
        """Runs until ``stop()``; raises SandboxUnavailable if the sandbox cannot start."""
        await self.pool.start()
        if self.sessions is not None:
            await self.sessions.start()
        server = self._serve_metrics()
        maintenance: asyncio.Task[None] | None = None
        session_calls: asyncio.Task[None] | None = None
        publisher = asyncio.create_task(self.publisher.run())
        try:
            if await self._connect():
                maintenance = asyncio.create_task(self._maintain())
                session_calls = self._serve_session_calls()
                self.ready.set()
                log.info("worker %s ready with %d slot(s)", self.settings.worker_id, self.slots)
                await self._claim_loop()
            await self._drain()
        finally:
            for task in (maintenance, session_calls, publisher):
                if task is not None:
                    task.cancel()
                    await asyncio.gather(task, return_exceptions=True)
            if self.sessions is not None:
                await self.sessions.stop()
            with contextlib.suppress(RedisError, OSError):
                await heartbeat.forget(self.redis, self.settings.worker_id)
            await self.pool.stop()
            await self.redis.aclose()
            if server is not None:
                server.shutdown()
            log.info("worker %s stopped", self.settings.worker_id)

    def _busy(self) -> float:
        return float(len(self._inflight))

    def _idle(self) -> float:
        return float(self.slots - len(self._inflight))

    def _serve_metrics(self) -> Any:
        if not self.settings.metrics_port:
            return None
        try:
            server, _ = start_http_server(
                self.settings.metrics_port, self.settings.metrics_host, self.metrics.registry
            )
        except OSError as exc:  # a taken port must not stop the worker from running jobs
            log.error("metrics port %d unavailable: %s", self.settings.metrics_port, exc)
            return None
        return server

    async def _connect(self) -> bool:
        """Waits for Redis (it may start after us); False if stopped first."""
        delay_s = BACKOFF_FIRST_S
        while not self._stopping.is_set():
            try:
                await ensure_group(self.redis)
                if self.session_calls is not None:
                    await self.session_calls.prime()  # before the heartbeat announces us
                await self._beat()
                return True
            except (RedisError, OSError) as exc:
                log.warning("Redis unreachable at start, retrying: %s", exc)
                await self._pause(delay_s)
                delay_s = min(BACKOFF_MAX_S, delay_s * 2)
        return False

    async def _claim_loop(self) -> None:
        delay_s = BACKOFF_FIRST_S
        while not self._stopping.is_set():
            free = self.slots - len(self._inflight)
            if free <= 0:
                self._slot_freed.clear()
                await self._slot_freed.wait()
                continue
            try:
                claimed = await self.claimer.claim(free)
            except (RedisError, OSError) as exc:
                log.warning("claiming failed, retrying in %.1f s: %s", delay_s, exc)
                await self._pause(delay_s)
                delay_s = min(BACKOFF_MAX_S, delay_s * 2)
                continue
            delay_s = BACKOFF_FIRST_S
            self._start(claimed)
            # Let the new jobs reach their slots before the next XREADGROUP goes out.
            await asyncio.sleep(0)

    def _start(self, claimed: list[Claimed]) -> None:
        for item in claimed:
            task = asyncio.create_task(self._handle(item))
            self._inflight[item.entry_id] = task
            task.add_done_callback(partial(self._done, item.entry_id))

    def _done(self, entry_id: bytes, _: object) -> None:
        self._inflight.pop(entry_id, None)
        self._slot_freed.set()

    async def _reclaimed(self, claimed: list[Claimed]) -> None:
        self.metrics.reclaimed.inc(len(claimed))
        self._start(claimed)

    async def _handle(self, item: Claimed) -> None:
        if item.job is None:
            await self._give_up(item, item.problem)
            return
        result = await self._execute(item.job, item.cancelled)
        self.metrics.jobs.labels(status=result.status.value).inc()
        if result.status not in (Status.NOT_STARTED, Status.CANCELLED):
            self.metrics.execution_seconds.observe(result.wall_s)
        await self.publisher.publish_with_retry(Publication(item.entry_id, item.job, result))

    async def _execute(self, job: QueuedJob, cancelled: bool) -> JobResult:
        # The one boundary where an unexpected infrastructure failure becomes a result.
        try:
            return await execute(job, cancelled, self.pool, self.sandbox)
        except Exception as exc:
            log.exception("job %s failed in the worker", job.id)
            message = f"codepool: the worker failed running this job: {exc!r}"
            return JobResult(id=job.id, status=Status.SANDBOX_ERROR, stderr=message)

    async def _give_up(self, item: Claimed, reason: str) -> None:
        try:
            await dead_letter(self.redis, item, reason, self.settings.reply_ttl_s)
            self.metrics.dead_lettered.inc()
        except (RedisError, OSError) as exc:
            log.error("could not dead-letter %r: %s", item.entry_id, exc)

    async def _maintain(self) -> None:
        """Heartbeat, in-flight refresh and the reaper's sweep, on one timer."""
        interval_s = min(self.settings.heartbeat_interval_s, self.settings.reclaim_idle_s / 3)
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self._beat()
                await self.reaper.refresh(self._inflight)
                if not self._stopping.is_set():
                    _, dead = await self.reaper.sweep(self.slots - len(self._inflight))
                    self.metrics.dead_lettered.inc(dead)
            except (RedisError, OSError) as exc:
                log.warning("maintenance failed (Redis down?): %s", exc)

    def _serve_session_calls(self) -> asyncio.Task[None] | None:
        if self.session_calls is None:
            return None
        return asyncio.create_task(self.session_calls.run())

    async def _beat(self) -> None:
        busy = len(self._inflight)
        sessions: dict[str, object] = {"incarnation": self.incarnation}
        if self.sessions is not None:
            sessions["sessions"] = self.sessions.live_sessions
            sessions["max_sessions"] = self.sessions.settings.max_sessions
        await heartbeat.beat(
            self.redis, self.settings.worker_id, self.slots, busy, self.settings.heartbeat_ttl_s,
            sessions,
        )  # fmt: skip

    async def _drain(self) -> None:
        tasks = list(self._inflight.values())
        if not tasks:
            return
        log.info("draining %d in-flight job(s)", len(tasks))
        _, late = await asyncio.wait(tasks, timeout=self.settings.drain_timeout_s)
        for task in late:  # their entries stay pending; a live worker reclaims them
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)

    async def _pause(self, delay_s: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stopping.wait(), delay_s)


async def serve(settings: WorkerSettings, sandbox: SandboxSettings) -> None:
    """Runs a worker until SIGTERM or SIGINT, then drains it."""
    worker = Worker(settings, sandbox)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, worker.stop)
    await worker.run()


async def check(settings: WorkerSettings) -> bool:
    """The liveness probe: True if this worker's heartbeat is fresh."""
    redis = connect(settings.redis_url)
    try:
        return await heartbeat.is_alive(redis, settings.worker_id)
    except (RedisError, OSError):
        return False
    finally:
        await redis.aclose()
