"""Session calls from the gateway: pick a worker, route by session id, await the reply.

A session lives in one worker's jails, so its calls go to that worker's own call stream. The
route (``cp:v1:session:<id>`` -> worker id and incarnation) is written when the session is
created or forked. If the worker's heartbeat is gone, or carries another incarnation (the
worker restarted), the session's state is gone with it: the answer is ``lost``.
"""

import asyncio
import time
import uuid
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.exceptions import RedisError

from executor import keys
from executor.jobs import SessionCall, SessionOp, SessionReply, SessionState
from gateway.pending import PendingResults

ROUTE_TTL_S = 2 * 3600  # refreshed on every call; longer than any session's idle TTL
CALL_STREAM_MAXLEN = 10_000
CALL_MARGIN_S = 15.0  # over a cell's own time limit: queueing, fork, host start


HTTP_STATUS = {"not_found": 404, "gone": 410, "quota": 429, "broken": 410, "internal": 503,
               "unavailable": 503, "timeout": 504}  # fmt: skip


class SessionProblem(Exception):
    """A session call that cannot be answered with a result; mapped to an HTTP status."""

    def __init__(self, reason: str, message: str, state: SessionState | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.state = state
        self.status_code = HTTP_STATUS.get(reason, 503)


class SessionRouter:
    """The gateway's side of sessions; one per gateway process."""

    def __init__(
        self, redis: Redis, reply_to: str, pending: PendingResults, worker_stale_s: float
    ) -> None:
        self.redis = redis
        self.reply_to = reply_to
        self.pending = pending
        self.worker_stale_s = worker_stale_s

    async def create(self, body: dict[str, Any], timeout_s: float) -> Any:
        """A new session on the worker with the most free session capacity."""
        worker_id, incarnation = await self._pick_worker()
        client_id = body.get("client_id")
        result = await self._call(worker_id, "create", None, body, client_id, timeout_s)
        await self._remember([result["id"]], worker_id, incarnation)
        return result

    async def call(
        self, op: SessionOp, session_id: str, body: dict[str, Any], timeout_s: float,
        client_id: str | None = None,
    ) -> Any:  # fmt: skip
        """``execute``, ``fork``, ``close`` or ``info`` on an existing session."""
        worker_id, incarnation = await self._locate(session_id)
        result = await self._call(worker_id, op, session_id, body, client_id, timeout_s)
        fresh = [copy["id"] for copy in result] if op == "fork" else []
        await self._remember([session_id, *fresh], worker_id, incarnation)
        return result

    async def _pick_worker(self) -> tuple[str, str]:
        raw = await self._redis(self.redis.hgetall(keys.WORKERS_HASH))
        now_s, best, best_free = time.time(), None, 0
        for worker_id, blob in raw.items():
            info = orjson.loads(blob)
            fresh = now_s - float(info.get("seen_s", 0)) <= self.worker_stale_s
            free = int(info.get("max_sessions", 0)) - int(info.get("sessions", 0))
            if fresh and "incarnation" in info and free > best_free:
                best, best_free = (worker_id.decode(), str(info["incarnation"])), free
        if best is None:
            raise SessionProblem("unavailable", "no live worker can take a session now")
        return best

    async def _locate(self, session_id: str) -> tuple[str, str]:
        route = await self._redis(self.redis.get(keys.session_route(session_id)))
        if route is None:
            raise SessionProblem("not_found", f"no session {session_id}")
        worker_id, incarnation = route.decode().split(" ", 1)
        if not await self._alive(worker_id, incarnation):
            message = f"session {session_id} was lost with its worker; its state cannot be replayed"
            raise SessionProblem("gone", message, SessionState.LOST)
        return worker_id, incarnation

    async def _alive(self, worker_id: str, incarnation: str) -> bool:
        beat = await self._redis(self.redis.get(keys.worker_heartbeat(worker_id)))
        return beat is not None and orjson.loads(beat).get("incarnation") == incarnation

    async def _remember(self, session_ids: list[str], worker_id: str, incarnation: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        for session_id in session_ids:
            pipe.set(keys.session_route(session_id), f"{worker_id} {incarnation}", ex=ROUTE_TTL_S)
        await self._redis(pipe.execute())

    async def _call(
        self, worker_id: str, op: SessionOp, session_id: str | None, body: dict[str, Any],
        client_id: str | None, timeout_s: float,
    ) -> Any:  # fmt: skip
        budget_s = timeout_s + CALL_MARGIN_S
        call = SessionCall(
            id=uuid.uuid4().hex, reply_to=self.reply_to, op=op, session_id=session_id,
            client_id=client_id, body=body, deadline_at_s=time.time() + budget_s,
        )  # fmt: skip
        future = self.pending.add(call.id)
        try:
            stream = keys.worker_session_calls(worker_id)
            fields: dict[Any, Any] = {keys.SESSION_CALL_FIELD: call.model_dump_json()}
            await self._redis(self.redis.xadd(stream, fields, maxlen=CALL_STREAM_MAXLEN))
            reply = await asyncio.wait_for(future, budget_s)
        except TimeoutError:
            if session_id is not None:
                await self._locate(session_id)  # raises "lost" if the worker died meanwhile
            raise SessionProblem("timeout", "the worker did not answer in time") from None
        finally:
            self.pending.discard([call.id])
        answer = SessionReply.model_validate_json(reply.raw)
        if not answer.ok:
            raise SessionProblem(answer.error or "internal", answer.message, answer.state)
        return answer.result

    async def _redis(self, awaitable: Any) -> Any:
        try:
            return await awaitable
        except (RedisError, OSError) as exc:
            raise SessionProblem("unavailable", f"Redis unavailable: {exc}") from exc
