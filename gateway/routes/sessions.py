"""Live sessions: create, run cells, fork per rollout, inspect, close."""

from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from executor.jobs import (
    CellResult,
    SessionCreateRequest,
    SessionExecuteRequest,
    SessionForkRequest,
    SessionInfo,
)
from gateway.auth import AuthDep
from gateway.sessions import SessionProblem, SessionRouter
from gateway.state import ServicesDep

router = APIRouter(prefix="/v1/sessions", tags=["sessions"], dependencies=[AuthDep])

SessionId = Annotated[str, Path(pattern=r"^[0-9a-f]{32}$", description="A session's id.")]
PROBLEMS: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such session"},
    410: {"description": "The session ended: `state` says closed, expired, killed or lost"},
    429: {"description": "Session quota reached (per worker or per client)"},
    503: {"description": "No worker can serve sessions now, or Redis is unavailable"},
    504: {"description": "The worker did not answer in time"},
}
CONTROL_TIMEOUT_S = 30.0  # create, fork, close, info: no code of the client's runs


class ForkResult(BaseModel):
    """The copies a fork made, in order."""

    sessions: list[SessionInfo]


def _router(services: ServicesDep) -> SessionRouter:
    return services.sessions


@router.post("", status_code=201, response_model=SessionInfo, responses=PROBLEMS)
async def create(request: SessionCreateRequest, services: ServicesDep) -> Any:
    """A new live interpreter; its globals persist between cells."""
    return await _router(services).create(request.model_dump(), CONTROL_TIMEOUT_S)


@router.get("/{session_id}", response_model=SessionInfo, responses=PROBLEMS)
async def info(session_id: SessionId, services: ServicesDep) -> Any:
    """The session's state, cells run and idle time."""
    return await _router(services).call("info", session_id, {}, CONTROL_TIMEOUT_S)


@router.post("/{session_id}/execute", response_model=CellResult, responses=PROBLEMS)
async def execute(
    session_id: SessionId, request: SessionExecuteRequest, services: ServicesDep
) -> Any:
    """Runs one cell; a timeout, an output flood or running out of memory ends the session."""
    timeout_s = request.timeout_s or services.settings.sandbox.max_timeout_s
    body = request.model_dump()
    return await _router(services).call("execute", session_id, body, timeout_s)


@router.post("/{session_id}/fork", response_model=ForkResult, responses=PROBLEMS)
async def fork(session_id: SessionId, request: SessionForkRequest, services: ServicesDep) -> Any:
    """``n`` independent copies of the session's state (one per rollout of a group)."""
    copies = await _router(services).call(
        "fork", session_id, request.model_dump(), CONTROL_TIMEOUT_S
    )
    return {"sessions": copies}


@router.delete("/{session_id}", response_model=SessionInfo, responses=PROBLEMS)
async def close(session_id: SessionId, services: ServicesDep) -> Any:
    """Ends the session; later calls answer 410 with state ``closed``."""
    return await _router(services).call("close", session_id, {}, CONTROL_TIMEOUT_S)


async def session_problem_handler(request: Request, exc: Exception) -> JSONResponse:
    """The HTTP shape of a session problem: its reason, and the state of an ended session."""
    assert isinstance(exc, SessionProblem)
    body: dict[str, Any] = {"detail": exc.message, "reason": exc.reason}
    if exc.state is not None:
        body["state"] = exc.state.value
    headers = {"Retry-After": "1"} if exc.status_code in (429, 503) else None
    return JSONResponse(body, status_code=exc.status_code, headers=headers)
