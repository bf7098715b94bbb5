"""Errors the gateway answers with, and their HTTP shapes (never a 500 for bad input)."""

from typing import Any

from fastapi import Request
from fastapi.responses import ORJSONResponse


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


async def field_error_handler(request: Request, exc: Exception) -> ORJSONResponse:
    """422 naming the field, like FastAPI's own validation errors."""
    assert isinstance(exc, FieldError)
    detail: list[dict[str, Any]] = [{"loc": ["body", *exc.loc], "msg": exc.message,
                                     "type": exc.kind}]  # fmt: skip
    return ORJSONResponse({"detail": detail}, status_code=422)


async def rejected_handler(request: Request, exc: Exception) -> ORJSONResponse:
    """429 / 503 with Retry-After and the reason."""
    assert isinstance(exc, Rejected)
    return ORJSONResponse(
        {"detail": exc.message, "reason": exc.reason},
        status_code=exc.status_code,
        headers={"Retry-After": str(exc.retry_after_s)},
    )
