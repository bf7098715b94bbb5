"""Length-prefixed JSON frames on raw file descriptors (the jail side of executor/framing.py)."""

import json
import os
import struct

HEADER = struct.Struct(">I")


def _read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd):
    """Blocks for one frame; None on EOF."""
    header = _read_exact(fd, HEADER.size)
    if header is None:
        return None
    body = _read_exact(fd, HEADER.unpack(header)[0])
    return None if body is None else json.loads(body)


def write_frame(fd, message):
    """Writes one frame fully (blocking)."""
    data = json.dumps(message).encode()
    view = memoryview(HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


class FrameBuffer:
    """Collects bytes read from a non-blocking descriptor until one frame is complete."""

    def __init__(self):
        self.data = bytearray()

    def feed(self, data):
        """Adds bytes; returns the decoded frame once complete, else None. Raises ValueError."""
        self.data += data
        if len(self.data) < HEADER.size:
            return None
        size = HEADER.unpack(self.data[: HEADER.size])[0]
        if len(self.data) < HEADER.size + size:
            return None
        return json.loads(bytes(self.data[HEADER.size : HEADER.size + size]))
