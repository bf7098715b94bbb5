"""Refuses request bodies over the configured size before they are read (413)."""

import orjson
from starlette.types import ASGIApp, Receive, Scope, Send


class BodyLimitMiddleware:
    """Answers 413 when Content-Length exceeds ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._too_large(scope):
            body = orjson.dumps(
                {
                    "detail": f"the request body exceeds {self.max_bytes} bytes",
                    "reason": "too_large",
                }
            )
            headers = [(b"content-type", b"application/json"),
                       (b"content-length", str(len(body)).encode())]  # fmt: skip
            await send({"type": "http.response.start", "status": 413, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _too_large(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"content-length":
                return not value.isdigit() or int(value) > self.max_bytes
        return False
