"""The reply listener: one task reads this gateway's reply stream and resolves waiters."""

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from executor.jobs import Status
from gateway.pending import PendingResults, Reply

log = logging.getLogger(__name__)

READ_COUNT = 1000
BLOCK_MS = 1000
BACKOFF_MAX_S = 2.0
# Trimming what was read costs a round trip: it is done at most this often or after this many
# entries (in a task of its own, beside the next read), and when the stream goes quiet.
TRIM_INTERVAL_S = 0.5
TRIM_AFTER_ENTRIES = 5000


def parse_reply(fields: dict[bytes, bytes]) -> Reply:
    """One reply-stream entry as a Reply."""
    return Reply(
        job_id=fields[keys.REPLY_ID_FIELD.encode()].decode(),
        status=Status(fields[keys.REPLY_STATUS_FIELD.encode()].decode()),
        raw=fields[keys.REPLY_RESULT_FIELD.encode()],
    )


def _next_id(entry_id: bytes) -> bytes:
    """The smallest stream id after ``entry_id`` (XTRIM MINID keeps the id it is given)."""
    ms, _, seq = entry_id.partition(b"-")
    return ms + b"-" + str(int(seq) + 1).encode()


class ReplyListener:
    """Reads ``stream`` with a blocking XREAD on its own connection and trims what it read."""

    def __init__(
        self,
        redis: Redis,
        stream: str,
        pending: PendingResults,
        on_reply: Callable[[Reply, bool], None],
    ) -> None:
        self.redis = redis
        self.stream = stream
        self.pending = pending
        self.on_reply = on_reply
        self.last_id = b"0-0"
        self._untrimmed = 0
        self._trimmed_at_s = 0.0
        self._trimming: asyncio.Task[None] | None = None

    def restart_from_scratch(self) -> None:
        """After Redis lost its data the stream starts again from the first id."""
        self.last_id = b"0-0"

    async def run(self) -> None:
        """Reads forever; Redis errors are logged and retried with backoff."""
        delay_s = 0.05
        try:
            while True:
                try:
                    await self._read_once()
                    delay_s = 0.05
                except (RedisError, OSError) as exc:
                    log.warning("reply listener: Redis error, retrying in %.2f s: %s",
                                delay_s, exc)  # fmt: skip
                    await asyncio.sleep(delay_s)
                    delay_s = min(BACKOFF_MAX_S, delay_s * 2)
        finally:
            if self._trimming is not None:
                self._trimming.cancel()

    async def _read_once(self) -> None:
        response: Any = await self.redis.xread(
            {self.stream: self.last_id}, count=READ_COUNT, block=BLOCK_MS
        )
        if not response:
            if self._untrimmed:
                await self._trim()
            return
        entries: list[tuple[bytes, dict[bytes, bytes]]] = response[0][1]
        for _, fields in entries:
            try:
                reply = parse_reply(fields)
            except (KeyError, ValueError, UnicodeDecodeError) as exc:
                log.error("dropping a malformed reply: %s", exc)
                continue
            self.on_reply(reply, self.pending.resolve(reply))
        self.last_id = entries[-1][0]
        self._untrimmed += len(entries)
        due = time.monotonic() - self._trimmed_at_s >= TRIM_INTERVAL_S
        if due or self._untrimmed >= TRIM_AFTER_ENTRIES:
            self._trim_in_background()

    def _trim_in_background(self) -> None:
        """Trims on the client's second connection while the next XREAD waits on the first."""
        if self._trimming is None or self._trimming.done():
            self._trimming = asyncio.create_task(self._trim_or_log())

    async def _trim_or_log(self) -> None:
        try:
            await self._trim()
        except (RedisError, OSError) as exc:  # the next trim covers what this one missed
            log.warning("reply listener: trimming failed: %s", exc)

    async def _trim(self) -> None:
        """Only this process reads the stream: what it has read can go."""
        read, upto = self._untrimmed, _next_id(self.last_id)
        await self.redis.xtrim(self.stream, minid=upto)
        self._untrimmed -= read
        self._trimmed_at_s = time.monotonic()
