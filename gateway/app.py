"""The FastAPI app factory and its lifespan: Redis, dispatcher, reply listener, monitor."""

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from gateway.body_limit import BodyLimitMiddleware
from gateway.dispatcher import Dispatcher
from gateway.errors import (
    FieldError,
    QueueLost,
    Rejected,
    field_error_handler,
    rejected_handler,
    validation_error_handler,
)
from gateway.idempotency import Idempotency
from gateway.metrics import GatewayMetrics, HttpMetricsMiddleware, build_version
from gateway.monitor import QueueMonitor
from gateway.pending import PendingResults, Reply
from gateway.redis_client import connect
from gateway.replies import ReplyListener
from gateway.routes import batches, codejudge, execute, ops, sessions
from gateway.sessions import SessionProblem, SessionRouter
from gateway.settings import GatewaySettings
from gateway.state import Services
from gateway.submit import Submitter

log = logging.getLogger(__name__)

LISTENER_CONNECTIONS = 2


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    """A gateway app; nothing is opened until its lifespan starts."""
    settings = settings or GatewaySettings()
    metrics = GatewayMetrics.create()
    app = FastAPI(
        title="codepool",
        version=build_version(),
        summary="Sandboxed code execution for agentic RL",
        lifespan=_lifespan,
    )
    app.state.settings = settings
    app.state.metrics = metrics
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    app.add_middleware(HttpMetricsMiddleware, metrics=metrics)
    app.add_exception_handler(RequestValidationError, validation_error_handler)
    app.add_exception_handler(FieldError, field_error_handler)
    app.add_exception_handler(Rejected, rejected_handler)
    app.add_exception_handler(QueueLost, _queue_lost_handler)
    app.add_exception_handler(RedisError, _redis_error_handler)
    app.add_exception_handler(SessionProblem, sessions.session_problem_handler)
    for router in (execute.router, batches.router, sessions.router, ops.router,
                   codejudge.router, codejudge.protected):  # fmt: skip
        app.include_router(router)
    return app


async def _queue_lost_handler(request: Any, exc: Exception) -> JSONResponse:
    settings: GatewaySettings = request.app.state.settings
    error = Rejected(503, "queue_lost", "Redis lost queued work (restarted?); retry",
                     settings.retry_after_s)  # fmt: skip
    request.app.state.metrics.rejections.labels(reason=error.reason).inc()
    return await rejected_handler(request, error)


async def _redis_error_handler(request: Any, exc: Exception) -> JSONResponse:
    """A Redis failure no route turned into an answer of its own: 503, never a 500."""
    settings: GatewaySettings = request.app.state.settings
    log.warning("%s %s: Redis failed: %s", request.method, request.url.path, exc)
    error = Rejected(503, "redis_unavailable", f"the queue is unavailable: {exc}",
                     settings.retry_after_s)  # fmt: skip
    request.app.state.metrics.rejections.labels(reason=error.reason).inc()
    return await rejected_handler(request, error)


@contextlib.asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: GatewaySettings = app.state.settings
    metrics: GatewayMetrics = app.state.metrics
    gateway_id = uuid.uuid4().hex[:16]
    reply_to = keys.reply_stream(gateway_id)
    redis = connect(settings.redis_url, settings.redis_max_connections,
                    settings.redis_pool_timeout_s)  # fmt: skip
    # The listener holds one connection in a blocking XREAD; nothing else may wait behind it.
    listener_redis = connect(settings.redis_url, LISTENER_CONNECTIONS,
                             settings.redis_pool_timeout_s)  # fmt: skip
    pending = PendingResults()

    def on_reply(reply: Reply, delivered: bool) -> None:
        if not delivered:
            metrics.duplicates.inc()

    listener = ReplyListener(listener_redis, reply_to, pending, on_reply)

    def on_data_lost() -> None:
        failed = pending.fail_all(QueueLost())
        listener.restart_from_scratch()
        log.error("Redis lost its data: %d waiting job(s) answered 503", failed)

    monitor = QueueMonitor(redis, gateway_id, settings.worker_stale_s, on_data_lost)
    dispatcher = Dispatcher(redis, settings.flush_max_items, settings.flush_linger_s,
                            settings.retry_after_s)  # fmt: skip
    idempotency = Idempotency(redis, settings.idempotency_ttl_s)
    submitter = Submitter(settings, reply_to, pending, dispatcher, idempotency, monitor, metrics)
    await monitor.poll()
    tasks = [
        asyncio.create_task(dispatcher.run()),
        asyncio.create_task(listener.run()),
        asyncio.create_task(monitor.run(settings.poll_interval_s)),
        asyncio.create_task(idempotency.run()),
    ]
    session_router = SessionRouter(redis, reply_to, pending, settings.worker_stale_s)
    app.state.services = Services(settings, redis, pending, monitor, submitter, metrics,
                                  gateway_id, session_router)  # fmt: skip
    log.info("gateway %s up, replies on %s", gateway_id, reply_to)
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await _forget(redis, reply_to, keys.gateway_marker(gateway_id))
        await redis.aclose()
        await listener_redis.aclose()


async def _forget(redis: Redis, *names: str) -> None:
    with contextlib.suppress(RedisError, OSError):
        await redis.delete(*names)
