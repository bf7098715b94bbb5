"""Length-prefixed JSON frames between the worker and a zygote (see executor/zygote.py)."""

import asyncio
import struct
from typing import Any

import orjson

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 256 * 1024 * 1024


class FrameError(RuntimeError):
    """The peer closed the stream or sent something that is not a frame."""


def encode(message: dict[str, Any]) -> bytes:
    """One frame: 4-byte big-endian length, then the JSON body."""
    body = orjson.dumps(message)
    return HEADER.pack(len(body)) + body


async def read(reader: asyncio.StreamReader) -> dict[str, Any]:
    """Reads one frame; raises FrameError on EOF or an absurd length."""
    try:
        header = await reader.readexactly(HEADER.size)
        (size,) = HEADER.unpack(header)
        if size > MAX_FRAME_BYTES:
            raise FrameError(f"frame of {size} bytes exceeds {MAX_FRAME_BYTES}")
        message = orjson.loads(await reader.readexactly(size))
    except asyncio.IncompleteReadError as exc:
        raise FrameError("zygote closed its pipe") from exc
    if not isinstance(message, dict):
        raise FrameError("frame is not a JSON object")
    return message
