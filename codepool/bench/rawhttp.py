"""A minimal HTTP/1.1 keep-alive client for the load generator.

httpx spends about 10 ms of CPU per request on this machine class, more than the service it
measures; this client sends a prepared request over a kept-alive connection and reads a
Content-Length response, at a fraction of that. Loopback benchmarks only.
"""

import asyncio
import contextlib
from urllib.parse import urlparse


class RawHttpError(Exception):
    """The server closed the connection or answered something this client does not read."""


class Connection:
    """One kept-alive connection; ``post`` is not re-entrant (one request at a time)."""

    def __init__(self, url: str, token: str | None = None) -> None:
        parsed = urlparse(url)
        self.host = parsed.hostname or "127.0.0.1"
        self.port = parsed.port or 80
        auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self._headers = f"Host: {self.host}:{self.port}\r\n{auth}Content-Type: application/json\r\n"
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        """(status, body) of one POST; reconnects once if the kept-alive connection closed."""
        for attempt in range(2):
            try:
                return await self._post(path, body)
            except (ConnectionError, asyncio.IncompleteReadError, RawHttpError):
                await self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        head = f"POST {path} HTTP/1.1\r\n{self._headers}Content-Length: {len(body)}\r\n\r\n"
        self._writer.write(head.encode() + body)
        status_line = await self._reader.readline()
        if not status_line:
            raise RawHttpError("connection closed")
        status = int(status_line.split(b" ", 2)[1])
        length = -1
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length < 0:
            raise RawHttpError("response without Content-Length")
        return status, await self._reader.readexactly(length)

    async def close(self) -> None:
        """Closes the connection (the next post opens a new one)."""
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(ConnectionError):
                await self._writer.wait_closed()
        self._reader = self._writer = None
