"""The HTTP client for live sessions (``/v1/sessions``). No FastAPI import here.

Sessions are state: a cell is never retried (it may have run). Only requests that cannot
have changed anything are retried — those that never reached the server, and creates or forks
answered 429 or 503. A session that ended raises :class:`SessionEnded` with its state; a lost
worker or an unreachable service raises :class:`ServiceError` (never the policy's fault).
"""

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.client import (
    RETRY_SAFE_HTTP_CODES,
    ExecuteResult,
    ServiceError,
    backoff_s,
    retry_after_s,
)


class SessionEnded(Exception):
    """The session is gone (``closed``, ``expired`` or ``killed``); ``state`` says which."""

    def __init__(self, session_id: str, state: str) -> None:
        super().__init__(f"session {session_id} is {state}")
        self.session_id = session_id
        self.state = state


@dataclass(frozen=True)
class SessionClientSettings:
    """Where the service is and how patient to be with it."""

    base_url: str
    request_timeout_s: float = 120.0
    max_attempts: int = 6
    backoff_initial_s: float = 0.1
    backoff_max_s: float = 5.0
    memory_mb: int | None = None
    timeout_s: float | None = None
    idle_ttl_s: float | None = None


class SessionClient:
    """``async with SessionClient(settings) as sessions``: create, execute, fork, close."""

    def __init__(self, settings: SessionClientSettings, http: httpx.AsyncClient | None = None):
        self.settings = settings
        timeout = httpx.Timeout(settings.request_timeout_s, connect=5.0)
        self._http = http or httpx.AsyncClient(base_url=settings.base_url, timeout=timeout)

    async def __aenter__(self) -> "SessionClient":
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self._http.aclose()

    async def create(self, client_id: str | None = None) -> str:
        """A new session's id."""
        body: dict[str, Any] = {
            name: value
            for name in ("memory_mb", "timeout_s", "idle_ttl_s")
            if (value := getattr(self.settings, name)) is not None
        }
        if client_id is not None:
            body["client_id"] = client_id
        data = await self._request("POST", "/v1/sessions", body, retry_busy=True)
        return str(data["id"])

    async def execute(
        self, session_id: str, code: str, stdin: str = "", timeout_s: float | None = None
    ) -> tuple[ExecuteResult, str]:
        """Runs one cell: its result, and the session's state after it (``alive``, ``killed``)."""
        body: dict[str, Any] = {"code": code, "stdin": stdin}
        if timeout_s is not None:
            body["timeout_s"] = timeout_s
        data = await self._request("POST", f"/v1/sessions/{session_id}/execute", body)
        return ExecuteResult.from_wire({**data, "id": session_id}), str(data["session_state"])

    async def fork(self, session_id: str, n: int) -> list[str]:
        """The ids of ``n`` independent copies of the session."""
        data = await self._request(
            "POST", f"/v1/sessions/{session_id}/fork", {"n": n}, retry_busy=True
        )
        return [str(copy["id"]) for copy in data["sessions"]]

    async def close(self, session_id: str) -> None:
        """Ends the session; one already ended is fine."""
        with contextlib.suppress(SessionEnded):
            await self._request("DELETE", f"/v1/sessions/{session_id}", None)

    async def _request(
        self, method: str, path: str, body: dict[str, Any] | None, retry_busy: bool = False
    ) -> Any:
        for attempt in range(1, self.settings.max_attempts + 1):
            wait_s: float | None = None
            try:
                response = await self._http.request(method, path, json=body)
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
                problem = f"connection failed: {exc!r}"  # nothing reached the server
            except httpx.HTTPError as exc:
                raise ServiceError(f"{method} {path} failed after sending: {exc!r}") from exc
            else:
                if response.status_code in (200, 201):
                    return response.json()
                if not (retry_busy and response.status_code in RETRY_SAFE_HTTP_CODES):
                    raise _problem(path, response)
                problem = f"HTTP {response.status_code}"
                wait_s = retry_after_s(response.headers.get("Retry-After"))
            if wait_s is None:
                wait_s = backoff_s(
                    attempt, self.settings.backoff_initial_s, self.settings.backoff_max_s
                )
            await asyncio.sleep(wait_s)
        raise ServiceError(f"{method} {path}: gave up after retries ({problem})")


def _problem(path: str, response: httpx.Response) -> Exception:
    try:
        data = response.json()
    except ValueError:
        data = {}
    state = data.get("state") if isinstance(data, dict) else None
    if response.status_code == 410 and state in ("closed", "expired", "killed"):
        return SessionEnded(path.split("/")[3], str(state))
    return ServiceError(f"{path}: HTTP {response.status_code}: {response.text[:300]}")
