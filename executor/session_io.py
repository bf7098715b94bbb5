"""Async frames over a non-blocking Unix socket, with descriptors where the protocol needs them."""

import asyncio
import socket
from typing import Any

import orjson

from executor import framing

RECV_CHUNK_BYTES = 65536


class SocketFrames:
    """Length-prefixed JSON frames on a stream socket, driven by the running event loop."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.sock = sock
        self._buffer = bytearray()

    async def send(self, message: dict[str, Any]) -> None:
        """Sends one frame."""
        await asyncio.get_running_loop().sock_sendall(self.sock, framing.encode(message))

    async def send_fds(self, fds: list[int]) -> None:
        """Sends one byte carrying ``fds`` (SCM_RIGHTS)."""
        await self._writable()
        socket.send_fds(self.sock, [b"F"], fds)

    async def recv(self) -> dict[str, Any]:
        """Receives one frame; raises FrameError when the peer closed."""
        loop = asyncio.get_running_loop()
        while True:
            message = self._take_frame()
            if message is not None:
                return message
            data = await loop.sock_recv(self.sock, RECV_CHUNK_BYTES)
            if not data:
                raise framing.FrameError("the session closed its socket")
            self._buffer += data

    async def recv_with_fds(self, max_fds: int) -> tuple[dict[str, Any], list[int]]:
        """Receives one frame sent in a single message together with descriptors."""
        while True:
            await self._readable()
            try:
                data, fds, _, _ = socket.recv_fds(self.sock, RECV_CHUNK_BYTES, max_fds)
            except BlockingIOError:
                continue
            if not data:
                raise framing.FrameError("the session closed its socket")
            self._buffer += data
            message = self._take_frame()
            if message is None:
                raise framing.FrameError("descriptors came without a whole frame")
            return message, fds

    def close(self) -> None:
        """Closes the socket."""
        self.sock.close()

    def _take_frame(self) -> dict[str, Any] | None:
        header_size = framing.HEADER.size
        if len(self._buffer) < header_size:
            return None
        (size,) = framing.HEADER.unpack(self._buffer[:header_size])
        if len(self._buffer) < header_size + size:
            return None
        body = bytes(self._buffer[header_size : header_size + size])
        del self._buffer[: header_size + size]
        message = orjson.loads(body)
        if not isinstance(message, dict):
            raise framing.FrameError("frame is not a JSON object")
        return message

    async def _readable(self) -> None:
        await _wait_fd(self.sock.fileno(), writable=False)

    async def _writable(self) -> None:
        await _wait_fd(self.sock.fileno(), writable=True)


async def _wait_fd(fd: int, writable: bool) -> None:
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    add, remove = (
        (loop.add_writer, loop.remove_writer) if writable else (loop.add_reader, loop.remove_reader)
    )

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    add(fd, wake)
    try:
        await ready
    finally:
        remove(fd)
