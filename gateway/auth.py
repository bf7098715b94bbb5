"""Optional bearer-token auth: off unless ``CODEPOOL_AUTH_TOKEN`` is set."""

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from gateway.settings import GatewaySettings

bearer = HTTPBearer(auto_error=False, description="Set when CODEPOOL_AUTH_TOKEN is configured.")


async def require_token(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
) -> None:
    """Rejects the request with 401 unless it carries the configured token."""
    settings: GatewaySettings = request.app.state.settings
    if settings.auth_token is None:
        return
    expected = settings.auth_token.get_secret_value().encode()
    given = credentials.credentials.encode() if credentials else b""
    if not hmac.compare_digest(given, expected):
        raise HTTPException(401, "missing or wrong bearer token",
                            headers={"WWW-Authenticate": "Bearer"})  # fmt: skip


AuthDep = Depends(require_token)
