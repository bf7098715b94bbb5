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
        return render(self.head, self.tail, self.total_bytes)


def render(head: bytes | bytearray, tail: bytes | bytearray, total_bytes: int) -> str:
    """A stream's kept head and tail as text, with a marker where its middle was dropped."""
    dropped = total_bytes - len(head) - len(tail)
    if dropped <= 0:
        return (bytes(head) + bytes(tail)).decode("utf-8", "replace")
    marker = f"\n[... codepool: {dropped} bytes truncated ...]\n"
    return head.decode("utf-8", "replace") + marker + tail.decode("utf-8", "replace")


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
