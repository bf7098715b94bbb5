"""Refuses request bodies over the configured size (413): from Content-Length before the body
is read, or, for a chunked body without one, as soon as what arrived passes the limit."""

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    """Raised into the app's body read once the refusal has been sent."""


class BodyLimitMiddleware:
    """Answers 413 when a request body exceeds ``max_bytes``."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self._declared_too_large(scope):
            await self.refuse(send)
            return
        await _CountedBody(self, scope, receive, send).run()

    def _declared_too_large(self, scope: Scope) -> bool:
        for name, value in scope["headers"]:
            if name == b"content-length":
                return not value.isdigit() or int(value) > self.max_bytes
        return False

    async def refuse(self, send: Send) -> None:
        """Sends the 413."""
        body = orjson.dumps(
            {"detail": f"the request body exceeds {self.max_bytes} bytes", "reason": "too_large"}
        )
        headers = [(b"content-type", b"application/json"),
                   (b"content-length", str(len(body)).encode())]  # fmt: skip
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


class _CountedBody:
    """One request whose body is counted as the app reads it (chunked bodies have no length)."""

    def __init__(
        self, limit: BodyLimitMiddleware, scope: Scope, receive: Receive, send: Send
    ) -> None:
        self.limit = limit
        self.scope = scope
        self.receive = receive
        self.send = send
        self.received_bytes = 0
        self.response_started = False
        self.refused = False

    async def run(self) -> None:
        """Runs the app; a body past the limit ends its read with a 413 already sent."""
        try:
            await self.limit.app(self.scope, self._receive, self._send)
        except BodyTooLarge:
            if not self.refused:
                raise

    async def _receive(self) -> Message:
        message = await self.receive()
        if message["type"] == "http.request":
            self.received_bytes += len(message.get("body", b""))
            if self.received_bytes > self.limit.max_bytes:
                if not self.response_started:
                    self.refused = True
                    await self.limit.refuse(self.send)
                raise BodyTooLarge
        return message

    async def _send(self, message: Message) -> None:
        if self.refused:  # the app's own answer to the failed read: the 413 went already
            return
        if message["type"] == "http.response.start":
            self.response_started = True
        await self.send(message)
