"""Head-and-tail capture of an output stream, with a visible truncation marker.

Used inside the jail (per job) and by the worker (per session cell).
"""

import os

READ_CHUNK_BYTES = 65536


class Capture:
    """Keeps the head and the tail of a byte stream, counting what it drops."""

    def __init__(self, cap_bytes: int) -> None:
        self.head_cap = cap_bytes // 2
        self.tail_cap = cap_bytes - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total_bytes = 0

    def feed(self, data: bytes) -> None:
        """Adds bytes from the stream."""
        self.total_bytes += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self) -> bool:
        """True when bytes were dropped between head and tail."""
        return self.total_bytes > len(self.head) + len(self.tail)

    def text(self) -> str:
        """The kept bytes as text (invalid UTF-8 replaced), with a marker where bytes were cut."""
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total_bytes - len(self.head) - len(self.tail)
        marker = f"\n[... codepool: {dropped} bytes truncated ...]\n"
        head = bytes(self.head).decode("utf-8", "replace")
        return head + marker + bytes(self.tail).decode("utf-8", "replace")


def read_available(fd: int, capture: Capture, budget_bytes: int) -> None:
    """Feeds ``capture`` what the non-blocking ``fd`` holds now, at most ``budget_bytes``.

    Never waits: a writer that never stops (a daemon, a thread) cannot hold the caller.
    """
    while budget_bytes > 0:
        try:
            data = os.read(fd, READ_CHUNK_BYTES)
        except BlockingIOError:
            return
        if not data:
            return
        capture.feed(data)
        budget_bytes -= len(data)
