"""Operations: liveness, readiness, status and Prometheus metrics."""

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel

from gateway.auth import AuthDep
from gateway.state import ServicesDep

router = APIRouter(tags=["operations"])


class QueueStatus(BaseModel):
    """The queue and the workers as this gateway last saw them."""

    redis_ok: bool
    queue_depth: int
    queue_pending: int
    workers: int
    slots: int
    busy_slots: int
    waiting_here: int


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up."""
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"description": "Redis unreachable or no live worker"}})
async def readyz(services: ServicesDep) -> JSONResponse:
    """Ready when Redis answers and at least one worker is alive."""
    state = services.monitor.state
    ready = state.redis_ok and state.workers > 0
    body = {"ready": ready, "redis_ok": state.redis_ok, "workers": state.workers}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/v1/status", response_model=QueueStatus, dependencies=[AuthDep])
async def status(services: ServicesDep) -> QueueStatus:
    """Queue depth, pending jobs, workers and slots."""
    state = services.monitor.state
    return QueueStatus(
        redis_ok=state.redis_ok, queue_depth=state.depth, queue_pending=state.pending,
        workers=state.workers, slots=state.slots, busy_slots=state.busy_slots,
        waiting_here=len(services.pending),
    )  # fmt: skip


@router.get("/metrics", response_class=Response)
async def metrics(services: ServicesDep) -> Response:
    """Prometheus exposition of this gateway process."""
    state = services.monitor.state
    services.metrics.queue_depth.set(state.depth)
    services.metrics.queue_pending.set(state.pending)
    return Response(generate_latest(services.metrics.registry), media_type=CONTENT_TYPE_LATEST)
