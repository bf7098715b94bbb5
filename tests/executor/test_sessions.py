"""Live sessions on real jails: state persists, forks are independent, limits end sessions."""

import asyncio
from collections.abc import AsyncIterator

import pytest

from executor.jobs import SessionCreateRequest, SessionExecuteRequest, SessionState, Status
from executor.sessions import SessionGone, SessionManager, SessionNotFound, SessionQuotaExceeded
from executor.settings import SandboxSettings, SessionSettings


@pytest.fixture(scope="module")
async def manager(sandbox_settings: SandboxSettings) -> AsyncIterator[SessionManager]:
    settings = SessionSettings(
        max_sessions=12, max_sessions_per_client=6, spare_hosts=1, expiry_interval_s=0.2
    )
    sessions = SessionManager(sandbox_settings, settings)
    await sessions.start()
    yield sessions
    await sessions.stop()


async def cell(manager: SessionManager, session_id: str, code: str, **kw: object) -> str:
    result = await manager.execute(session_id, SessionExecuteRequest(code=code, **kw))  # type: ignore[arg-type]
    assert result.status == Status.OK, result.stderr
    return result.stdout


async def test_state_persists_between_cells(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    await cell(manager, session.id, "import math\ndef area(r):\n    return math.pi * r * r")
    assert await cell(manager, session.id, "round(area(2), 3)") == "12.566\n"
    assert await cell(manager, session.id, "x = 5") == ""
    assert await cell(manager, session.id, "print(x * 2)") == "10\n"
    assert await cell(manager, session.id, "input()", stdin="typed") == "'typed'\n"
    assert manager.info(session.id).cells_run == 5
    await manager.close(session.id)


async def test_an_error_keeps_the_session(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    await cell(manager, session.id, "kept = 'yes'")
    failed = await manager.execute(session.id, SessionExecuteRequest(code="1/0"))
    assert (failed.status, failed.session_state) == (Status.ERROR, SessionState.ALIVE)
    assert "ZeroDivisionError" in failed.stderr
    assert await cell(manager, session.id, "kept") == "'yes'\n"
    await manager.close(session.id)


async def test_forks_are_independent_copies(manager: SessionManager) -> None:
    parent = await manager.create(SessionCreateRequest())
    await cell(manager, parent.id, "state = [1]\nimport numpy\narr = numpy.arange(3)")
    copies = await manager.fork(parent.id, 3)
    assert [c.parent_id for c in copies] == [parent.id] * 3
    for i, copy in enumerate(copies):
        await cell(manager, copy.id, f"state.append({i})\narr[0] = {10 + i}")
    outputs = await asyncio.gather(*(cell(manager, c.id, "state, int(arr[0])") for c in copies))
    assert outputs == ["([1, 0], 10)\n", "([1, 1], 11)\n", "([1, 2], 12)\n"]
    assert await cell(manager, parent.id, "state, int(arr[0])") == "([1], 0)\n"
    for session in (parent, *copies):
        await manager.close(session.id)


async def test_families_cannot_see_each_other(manager: SessionManager) -> None:
    first = await manager.create(SessionCreateRequest())
    second = await manager.create(SessionCreateRequest())
    code = "import os\nsorted(int(p) for p in os.listdir('/proc') if p.isdigit())"
    assert await cell(manager, first.id, code) == await cell(manager, second.id, code)
    # each jail holds only its host (pid 1) and its own session
    assert await cell(manager, first.id, code) == "[1, 2]\n"
    for session in (first, second):
        await manager.close(session.id)


async def test_a_cell_timeout_ends_the_session(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    slow = await manager.execute(
        session.id, SessionExecuteRequest(code="print('started')\nwhile True: pass", timeout_s=1)
    )
    assert (slow.status, slow.session_state, slow.stdout) == (
        Status.TIMEOUT, SessionState.KILLED, "started\n",
    )  # fmt: skip
    with pytest.raises(SessionGone) as gone:
        await manager.execute(session.id, SessionExecuteRequest(code="1"))
    assert gone.value.state == SessionState.KILLED


async def test_running_out_of_memory_ends_the_session(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest(memory_mb=128))
    result = await manager.execute(session.id, SessionExecuteRequest(code="x = bytearray(2**31)"))
    assert (result.status, result.session_state) == (Status.MEMORY_LIMIT, SessionState.KILLED)
    with pytest.raises(SessionGone):
        manager.info(session.id)


async def test_an_output_flood_ends_the_session(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    flood = "while True: print('x' * 10000)"
    result = await manager.execute(session.id, SessionExecuteRequest(code=flood))
    assert (result.status, result.session_state) == (Status.OUTPUT_LIMIT, SessionState.KILLED)
    assert result.stdout_truncated


async def test_a_session_that_exits_is_gone(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    result = await manager.execute(session.id, SessionExecuteRequest(code="import os\nos._exit(7)"))
    assert (result.status, result.exit_code) == (Status.ERROR, 7)
    assert result.session_state == SessionState.KILLED
    signalled = await manager.create(SessionCreateRequest())
    killed = await manager.execute(
        signalled.id, SessionExecuteRequest(code="import os, signal\nos.kill(os.getpid(), 11)")
    )
    assert (killed.status, killed.signal) == (Status.KILLED, "SIGSEGV")


async def test_hostile_code_in_a_session_is_contained(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    code = """
import os, socket
try:
    socket.create_connection(("127.0.0.1", 22), timeout=1)
    print("CONNECTED")
except OSError:
    print("no network")
for path in ("/usr/x", "/opt/codepool-jail/x"):
    try:
        open(path, "w")
        print("WROTE", path)
    except OSError:
        pass
print(os.getuid(), "REDIS" in str(os.environ))
"""
    assert await cell(manager, session.id, code) == "no network\n65534 False\n"
    await manager.close(session.id)


async def test_idle_sessions_expire(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest(idle_ttl_s=0.5))
    await asyncio.sleep(1.5)
    with pytest.raises(SessionGone) as gone:
        await manager.execute(session.id, SessionExecuteRequest(code="1"))
    assert gone.value.state == SessionState.EXPIRED


async def test_closed_and_unknown_sessions(manager: SessionManager) -> None:
    session = await manager.create(SessionCreateRequest())
    assert (await manager.close(session.id)).state == SessionState.CLOSED
    with pytest.raises(SessionGone):
        await manager.execute(session.id, SessionExecuteRequest(code="1"))
    with pytest.raises(SessionNotFound):
        manager.info("no-such-session")


async def test_quotas(manager: SessionManager) -> None:
    held = [await manager.create(SessionCreateRequest(client_id="greedy")) for _ in range(6)]
    with pytest.raises(SessionQuotaExceeded, match="greedy"):
        await manager.create(SessionCreateRequest(client_id="greedy"))
    with pytest.raises(SessionQuotaExceeded):
        await manager.fork(held[0].id, 1)
    other = await manager.create(SessionCreateRequest(client_id="other"))
    with pytest.raises(SessionQuotaExceeded, match="worker"):
        await manager.fork(other.id, 12)
    for session in (*held, other):
        await manager.close(session.id)
    assert manager.live_sessions == 0
