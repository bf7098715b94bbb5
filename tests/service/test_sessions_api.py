"""Sessions over HTTP against a real stack: state, forks, ends, quotas, a worker's death."""

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.service.stack import GatewayThread, RedisServer, Workers, gateway_settings, wait_ready

SESSION_ENV = {
    "CODEPOOL_SESSION_MAX_SESSIONS": "8",
    "CODEPOOL_SESSION_MAX_SESSIONS_PER_CLIENT": "4",
    "CODEPOOL_SESSION_EXPIRY_INTERVAL_S": "0.2",
    "CODEPOOL_HEARTBEAT_INTERVAL_S": "0.5",
    "CODEPOOL_HEARTBEAT_TTL_S": "2",
}


class SessionStack:
    """Redis, one worker with small session quotas, a gateway."""

    def __init__(self, run_dir: Path) -> None:
        self.redis = RedisServer(run_dir)
        self.redis.start()
        self.workers = Workers(self.redis.url, env=SESSION_ENV)
        settings = gateway_settings(self.redis.url, worker_stale_s=2.0)
        self.gateway = GatewayThread(settings).start()
        self.workers.start(0)
        self.workers.wait_alive(1)
        wait_ready(self.gateway.url)
        self.http = httpx.Client(base_url=self.gateway.url, timeout=60)

    def close(self) -> None:
        self.http.close()
        self.gateway.stop()
        self.workers.stop_all()
        self.redis.stop()

    def create(self, **body: object) -> str:
        response = self.http.post("/v1/sessions", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def run(self, session_id: str, code: str, **body: object) -> httpx.Response:
        return self.http.post(f"/v1/sessions/{session_id}/execute", json={"code": code, **body})

    def stdout(self, session_id: str, code: str) -> str:
        response = self.run(session_id, code)
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["status"] == "ok", result
        return str(result["stdout"])


@pytest.fixture(scope="module")
def sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionStack]:
    stack = SessionStack(Path(tmp_path_factory.mktemp("sessions")))
    try:
        yield stack
    finally:
        stack.close()


def test_state_persists_and_forks_are_independent(sessions: SessionStack) -> None:
    parent = sessions.create()
    assert sessions.stdout(parent, "def f(x):\n    return x * 3\nacc = [1]") == ""
    assert sessions.stdout(parent, "f(14)") == "42\n"
    forked = sessions.http.post(f"/v1/sessions/{parent}/fork", json={"n": 2})
    assert forked.status_code == 200, forked.text
    copies = [s["id"] for s in forked.json()["sessions"]]
    assert len(set(copies)) == 2
    sessions.stdout(copies[0], "acc.append('a')")
    sessions.stdout(copies[1], "acc.append('b')")
    assert [sessions.stdout(c, "acc") for c in copies] == ["[1, 'a']\n", "[1, 'b']\n"]
    assert sessions.stdout(parent, "acc") == "[1]\n"
    info = sessions.http.get(f"/v1/sessions/{copies[0]}").json()
    assert (info["state"], info["parent_id"], info["cells_run"]) == ("alive", parent, 2)
    for session_id in (parent, *copies):
        assert sessions.http.delete(f"/v1/sessions/{session_id}").json()["state"] == "closed"
    gone = sessions.run(parent, "acc")
    assert (gone.status_code, gone.json()["state"]) == (410, "closed")


def test_a_killing_cell_ends_the_session(sessions: SessionStack) -> None:
    session_id = sessions.create(timeout_s=1)
    result = sessions.run(session_id, "while True: pass").json()
    assert (result["status"], result["session_state"]) == ("timeout", "killed")
    later = sessions.run(session_id, "1")
    assert (later.status_code, later.json()["state"]) == (410, "killed")


def test_hostile_code_in_a_session_is_contained(sessions: SessionStack) -> None:
    session_id = sessions.create()
    code = (
        "import os, socket\n"
        "try:\n    socket.create_connection(('127.0.0.1', 6379), timeout=1); print('CONNECTED')\n"
        "except OSError:\n    print('no network')\n"
        "print(os.getuid(), any('REDIS' in k for k in os.environ))"
    )
    assert sessions.stdout(session_id, code) == "no network\n65534 False\n"
    sessions.http.delete(f"/v1/sessions/{session_id}")


def test_bad_requests_and_unknown_sessions(sessions: SessionStack) -> None:
    assert sessions.http.post("/v1/sessions", json={"memory_mb": "lots"}).status_code == 422
    assert sessions.http.get("/v1/sessions/not-an-id").status_code == 422
    unknown = sessions.http.get(f"/v1/sessions/{'0' * 32}")
    assert (unknown.status_code, unknown.json()["reason"]) == (404, "not_found")
    session_id = sessions.create()
    missing_code = sessions.http.post(f"/v1/sessions/{session_id}/execute", json={})
    assert missing_code.status_code == 422
    assert "code" in str(missing_code.json()["detail"])
    too_many = sessions.http.post(f"/v1/sessions/{session_id}/fork", json={"n": 0})
    assert too_many.status_code == 422
    sessions.http.delete(f"/v1/sessions/{session_id}")


def test_quotas_answer_429(sessions: SessionStack) -> None:
    held = [sessions.create(client_id="greedy") for _ in range(4)]
    refused = sessions.http.post("/v1/sessions", json={"client_id": "greedy"})
    assert (refused.status_code, refused.json()["reason"]) == (429, "quota")
    assert refused.headers["Retry-After"] == "1"
    for session_id in held:
        sessions.http.delete(f"/v1/sessions/{session_id}")


def test_idle_sessions_expire(sessions: SessionStack) -> None:
    session_id = sessions.create(idle_ttl_s=0.5)
    time.sleep(1.5)
    later = sessions.run(session_id, "1")
    assert (later.status_code, later.json()["state"]) == (410, "expired")


def test_sessions_are_lost_with_their_worker(sessions: SessionStack) -> None:
    session_id = sessions.create()
    sessions.stdout(session_id, "x = 1")
    sessions.workers.procs["test-0"].send_signal(signal.SIGKILL)
    sessions.workers.procs["test-0"].wait()
    time.sleep(2.5)  # the heartbeat's TTL
    lost = sessions.run(session_id, "x")
    assert (lost.status_code, lost.json()["state"]) == (410, "lost")
    sessions.workers.start(0)  # the same worker id comes back: a new incarnation
    sessions.workers.wait_alive(1)
    deadline = time.monotonic() + 30
    while sessions.http.post("/v1/sessions", json={}).status_code != 201:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    still_lost = sessions.run(session_id, "x")
    assert (still_lost.status_code, still_lost.json()["state"]) == (410, "lost")
