"""``codepool serve``: everything on one machine, stopped with no orphan left."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis

from executor import keys
from tests.conftest import unique_uid_base
from tests.service.stack import TEST_SANDBOX_ENV, free_port

pytestmark = pytest.mark.timeout(120)


def descendants(root: int) -> set[int]:
    """Every live process below ``root``, from /proc."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


def alive(pids: set[int]) -> set[int]:
    """Those of ``pids`` still running (zombies count as gone)."""
    running = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.add(pid)
    return running


def children_of(serve_pid: int) -> dict[str, int]:
    """Serve's live children: "redis", "gateway" and each worker id -> pid."""
    found = {}
    for pid in alive(descendants(serve_pid)):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"redis-server" in argv[0]:
            found["redis"] = pid
        elif argv[1:4] == [b"-m", b"codepool", b"gateway"]:
            found["gateway"] = pid
        elif argv[1:4] == [b"-m", b"codepool", b"worker"]:
            ids = [v.split(b"=", 1)[1] for v in environ if v.startswith(b"CODEPOOL_WORKER_ID=")]
            found[ids[0].decode()] = pid
    return found


def workers_of(serve_pid: int) -> dict[str, int]:
    """Serve's live worker processes: worker id -> pid."""
    return {k: v for k, v in children_of(serve_pid).items() if k.startswith("serve-")}


def eventually_runs(url: str, timeout_s: float) -> None:
    """Retries one small job until the service answers it (it may be restarting)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            response = httpx.post(f"{url}/v1/execute", json={"code": "print(6*7)"}, timeout=10)
            if response.status_code == 200 and response.json()["stdout"] == "42\n":
                return
        except httpx.HTTPError:
            pass
        assert time.monotonic() < deadline, "the service did not come back"
        time.sleep(0.3)


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    port = free_port()
    # Jobs of a dead worker are reclaimed after 3 s idle instead of 30 s.
    env = {**os.environ, **TEST_SANDBOX_ENV, "CODEPOOL_RECLAIM_IDLE_S": "3",
           "CODEPOOL_CLAIM_BLOCK_S": "0.5"}  # fmt: skip
    argv = [
        sys.executable,
        "-m",
        "codepool",
        "serve",
        "--port",
        str(port),
        "--workers",
        "2",
        "--slots",
        "2",
        "--uid-base",
        str(unique_uid_base() + 90),
        "--worker-metrics-port",
        "0",
        "--run-dir",
        str(tmp_path / "run"),
        "--log-level",
        "warning",
    ]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "ready at" in line:
                break
        else:
            pytest.fail(f"serve exited early with {proc.wait()}")
        yield proc, f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_runs_everything_and_sigterm_leaves_no_orphan(
    serve: tuple[subprocess.Popen[str], str],
) -> None:
    proc, url = serve
    result = httpx.post(f"{url}/v1/execute", json={"code": "print(6*7)"}, timeout=30).json()
    assert result["stdout"] == "42\n"
    status = httpx.get(f"{url}/v1/status").json()
    assert (status["workers"], status["slots"]) == (2, 4)
    family = descendants(proc.pid)
    assert len(family) >= 4  # redis, two workers, the gateway (and their jails)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert alive(family) == set()


def test_killed_serve_takes_its_children_down(serve: tuple[subprocess.Popen[str], str]) -> None:
    proc, _ = serve
    family = descendants(proc.pid)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 40
    while alive(family):
        assert time.monotonic() < deadline, f"orphans left: {alive(family)}"
        time.sleep(0.2)


def test_a_killed_worker_is_started_again_and_its_jobs_still_answered(
    serve: tuple[subprocess.Popen[str], str], tmp_path: Path
) -> None:
    proc, url = serve
    started = workers_of(proc.pid)
    victim, survivor = started["serve-0"], started["serve-1"]
    queue = redis.Redis(unix_socket_path=str(tmp_path / "run" / "redis.sock"))
    jails = descendants(victim)
    assert jails  # its nsjail processes and zygotes
    items = [{"code": f"import time; time.sleep(0.5); print({i})"} for i in range(24)]
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(
            httpx.post, f"{url}/v1/execute/batch", json={"items": items}, timeout=90
        )
        time.sleep(1.0)  # each worker now runs two of the jobs
        held = queue.xpending_range(
            keys.JOBS_STREAM, keys.WORKERS_GROUP, "-", "+", 100, consumername="serve-0"
        )
        assert held  # it dies holding jobs
        os.kill(victim, signal.SIGKILL)
        results = batch.result().json()["results"]
    assert [r["status"] for r in results] == ["ok"] * 24
    assert [r["stdout"] for r in results] == [f"{i}\n" for i in range(24)]
    deadline = time.monotonic() + 60
    while len(workers := workers_of(proc.pid)) < 2:
        assert time.monotonic() < deadline, "the killed worker was not started again"
        time.sleep(0.2)
    assert workers["serve-1"] == survivor and workers["serve-0"] != victim
    assert alive(jails) == set()  # the dead worker's jails died with it
    status = httpx.get(f"{url}/v1/status").json()
    assert (status["workers"], status["slots"]) == (2, 4)
    result = httpx.post(f"{url}/v1/execute", json={"code": "print(6*7)"}, timeout=30).json()
    assert result["stdout"] == "42\n"
    assert proc.poll() is None  # serve lives on
    assert queue.xlen(keys.JOBS_STREAM) == 0  # every entry acknowledged
    queue.close()


@pytest.mark.parametrize("victim", ["redis", "gateway"])
def test_a_killed_redis_or_gateway_is_started_again(
    serve: tuple[subprocess.Popen[str], str], victim: str
) -> None:
    proc, url = serve
    before = children_of(proc.pid)
    assert set(before) == {"redis", "gateway", "serve-0", "serve-1"}
    os.kill(before[victim], signal.SIGKILL)
    eventually_runs(url, timeout_s=60)
    after = children_of(proc.pid)
    assert set(after) == set(before)
    assert after[victim] != before[victim]
    assert {k: after[k] for k in after if k != victim} == {
        k: before[k] for k in before if k != victim
    }  # nothing else was restarted
    assert proc.poll() is None
