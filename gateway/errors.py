"""Errors the gateway answers with, and their HTTP shapes (never a 500 for bad input)."""

from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


class FieldError(Exception):
    """Bad input in one field; answered 422 in FastAPI's own error shape."""

    def __init__(self, loc: list[str | int], message: str, kind: str = "value_error") -> None:
        super().__init__(message)
        self.loc = loc
        self.message = message
        self.kind = kind


class Rejected(Exception):
    """Work refused for now (queue full, Redis down): 429 or 503 with Retry-After."""

    def __init__(self, status_code: int, reason: str, message: str, retry_after_s: int) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.reason = reason
        self.message = message
        self.retry_after_s = retry_after_s


class QueueLost(Exception):
    """Redis lost the queue (restart without persistence) while the job waited."""


async def field_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 naming the field, like FastAPI's own validation errors."""
    assert isinstance(exc, FieldError)
    detail: list[dict[str, Any]] = [{"loc": ["body", *exc.loc], "msg": exc.message,
                                     "type": exc.kind}]  # fmt: skip
    return JSONResponse({"detail": detail}, status_code=422)


async def rejected_handler(request: Request, exc: Exception) -> JSONResponse:
    """429 / 503 with Retry-After and the reason."""
    assert isinstance(exc, Rejected)
    return JSONResponse(
        {"detail": exc.message, "reason": exc.reason},
        status_code=exc.status_code,
        headers={"Retry-After": str(exc.retry_after_s)},
    )


async def validation_error_handler(request: Request, exc: Exception) -> JSONResponse:
    """422 naming each bad field; the offending input is not echoed (it may be huge or NaN)."""
    assert isinstance(exc, RequestValidationError)
    detail = [{"loc": list(err["loc"]), "msg": str(err["msg"]), "type": str(err["type"])}
              for err in exc.errors()]  # fmt: skip
    return JSONResponse({"detail": detail}, status_code=422)
