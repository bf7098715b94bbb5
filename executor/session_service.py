"""The worker's session calls: read this worker's call stream, serve each call, reply.

Sessions are state, not jobs: a call is answered once, by the worker that holds the session,
and never re-delivered to another worker (which could not serve it anyway). The gateway
notices a dead worker by its heartbeat and answers ``lost``.
"""

import asyncio
import logging
import time
from typing import Any

from pydantic import BaseModel, ValidationError
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from executor.jobs import (
    SessionCall,
    SessionCreateRequest,
    SessionExecuteRequest,
    SessionForkRequest,
    SessionReply,
    Status,
)
from executor.sessions import SessionError, SessionGone, SessionManager

log = logging.getLogger(__name__)

READ_COUNT = 100
BLOCK_MS = 1000
BACKOFF_MAX_S = 2.0
CALL_STREAM_MAXLEN = 10_000


class SessionService:
    """Serves session calls addressed to ``worker_id`` with ``manager``."""

    def __init__(
        self, redis: Redis, worker_id: str, manager: SessionManager, reply_ttl_s: int
    ) -> None:
        self.redis = redis
        self.stream = keys.worker_session_calls(worker_id)
        self.manager = manager
        self.reply_ttl_s = reply_ttl_s
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_id: bytes | str = "$"

    async def prime(self) -> None:
        """Remembers where the stream ends now: calls after this point are ours to serve.

        Called before the worker announces itself, so that a call made as soon as the gateway
        sees this incarnation is not missed; older calls were for a previous incarnation.
        """
        last: Any = await self.redis.xrevrange(self.stream, count=1)
        self._last_id = bytes(last[0][0]) if last else b"0-0"

    async def run(self) -> None:
        """Reads calls until cancelled, from where ``prime`` left off."""
        last_id = self._last_id
        delay_s = 0.05
        while True:
            try:
                response: Any = await self.redis.xread(
                    {self.stream: last_id}, count=READ_COUNT, block=BLOCK_MS
                )
                delay_s = 0.05
            except (RedisError, OSError) as exc:
                log.warning("session calls: Redis error, retrying in %.2f s: %s", delay_s, exc)
                await asyncio.sleep(delay_s)
                delay_s = min(BACKOFF_MAX_S, delay_s * 2)
                continue
            if not response:
                continue
            entries: list[tuple[bytes, dict[bytes, bytes]]] = response[0][1]
            last_id = entries[-1][0]
            for _, fields in entries:
                self._spawn(fields.get(keys.SESSION_CALL_FIELD.encode(), b""))

    def _spawn(self, raw: bytes) -> None:
        task = asyncio.create_task(self._serve(raw))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, raw: bytes) -> None:
        try:
            call = SessionCall.model_validate_json(raw)
        except ValidationError as exc:
            log.error("dropping a malformed session call: %s", exc)
            return
        if time.time() > call.deadline_at_s:
            return  # the gateway has answered already
        reply = await self.answer(call)
        try:
            await self._publish(call, reply)
        except (RedisError, OSError) as exc:
            log.error("could not answer session call %s: %s", call.id, exc)

    async def answer(self, call: SessionCall) -> SessionReply:
        """The call's reply; session failures are data, never exceptions."""
        try:
            return SessionReply(ok=True, result=_dump(await self._dispatch(call)))
        except SessionGone as exc:
            return SessionReply(ok=False, error="gone", message=str(exc), state=exc.state)
        except SessionError as exc:
            return SessionReply(ok=False, error=exc.reason, message=str(exc))
        except ValidationError as exc:
            return SessionReply(ok=False, error="internal", message=f"bad call body: {exc}")
        except Exception as exc:  # the boundary where an infrastructure failure becomes data
            log.exception("session call %s failed", call.id)
            return SessionReply(ok=False, error="internal", message=repr(exc))

    async def _dispatch(self, call: SessionCall) -> Any:
        manager, session_id = self.manager, call.session_id or ""
        if call.op == "create":
            return await manager.create(SessionCreateRequest.model_validate(call.body))
        if call.op == "execute":
            request = SessionExecuteRequest.model_validate(call.body)
            return await manager.execute(session_id, request)
        if call.op == "fork":
            fork = SessionForkRequest.model_validate(call.body)
            return await manager.fork(session_id, fork.n, call.client_id)
        if call.op == "close":
            return await manager.close(session_id)
        return manager.info(session_id)

    async def _publish(self, call: SessionCall, reply: SessionReply) -> None:
        pipe = self.redis.pipeline(transaction=True)
        pipe.xadd(call.reply_to, {
            keys.REPLY_ID_FIELD: call.id,
            keys.REPLY_STATUS_FIELD: Status.OK.value,
            keys.REPLY_RESULT_FIELD: reply.model_dump_json(),
        })  # fmt: skip
        pipe.expire(call.reply_to, self.reply_ttl_s)
        await pipe.execute()


def _dump(result: Any) -> Any:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, list):
        return [_dump(item) for item in result]
    return result
