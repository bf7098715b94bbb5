"""``codepool serve``: Redis, N workers and the gateway on this machine, stopped together.

Redis listens on a unix socket in a run directory (unless ``--redis-url`` is given), the
workers and the gateway are child processes configured through ``CODEPOOL_*`` variables.
SIGINT or SIGTERM stops the gateway, drains the workers, stops Redis, and exits: every child
is stopped by its pid, and every child dies with serve if serve itself is killed. A child that
dies on its own is started again (``supervise``).
"""

import logging
import shutil
import signal
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import httpx
import redis

from codepool.children import Children, child_env
from executor.pool import FRESH_ID_OFFSET
from executor.sessions import worker_uid_span
from executor.settings import SandboxSettings, SessionSettings

log = logging.getLogger(__name__)

REDIS_START_TIMEOUT_S = 10.0
# A child that dies is started again, unless it died this often within the window: then
# something is wrong that a restart will not fix, and serve stops with the error.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 300.0


def uid_stride(slots: int) -> int:
    """Outside uids one worker needs: warm slots and session jails, or its fresh-jail range."""
    sandbox = SandboxSettings(slots=slots)
    if sandbox.isolation == "warm":
        return worker_uid_span(sandbox, SessionSettings())
    return FRESH_ID_OFFSET + max(slots * 4, 64)


@dataclass(frozen=True)
class ServeOptions:
    """What ``codepool serve`` was asked to run."""

    host: str
    port: int
    workers: int
    slots: int
    redis_url: str | None
    run_dir: Path | None
    uid_base: int
    worker_metrics_port: int
    drain_timeout_s: float
    ready_timeout_s: float


class Stop(Exception):
    """SIGINT or SIGTERM arrived."""


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    raise Stop(signal.Signals(signum).name)


def start_redis(children: Children, run_dir: Path) -> str:
    """A private redis-server on a unix socket in ``run_dir``; returns its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server not found: install the Debian package redis-server")
    socket_path = run_dir / "redis.sock"
    argv = [binary, "--port", "0", "--unixsocket", str(socket_path), "--unixsocketperm", "700",
            "--save", "", "--appendonly", "no", "--dir", str(run_dir),
            "--loglevel", "warning"]  # fmt: skip
    children.start("redis", argv, child_env(), log_path=run_dir / "redis.log")
    client = redis.Redis(unix_socket_path=str(socket_path))
    deadline = time.monotonic() + REDIS_START_TIMEOUT_S
    while True:
        try:
            client.ping()
            client.close()
            return f"unix://{socket_path}"
        except (redis.RedisError, OSError):
            if time.monotonic() > deadline or children.exited():
                raise RuntimeError(f"redis-server did not start on {socket_path}") from None
            time.sleep(0.05)


def start_workers(children: Children, options: ServeOptions, redis_url: str) -> None:
    """N worker processes, each with outside uids of its own."""
    for index in range(options.workers):
        metrics_port = options.worker_metrics_port + index if options.worker_metrics_port else 0
        env = child_env(
            CODEPOOL_REDIS_URL=redis_url,
            CODEPOOL_WORKER_ID=f"serve-{index}",
            CODEPOOL_METRICS_PORT=str(metrics_port),
            CODEPOOL_METRICS_HOST="127.0.0.1",
            CODEPOOL_DRAIN_TIMEOUT_S=str(options.drain_timeout_s),
            CODEPOOL_SANDBOX_SLOTS=str(options.slots),
            CODEPOOL_SANDBOX_UID_BASE=str(options.uid_base + index * uid_stride(options.slots)),
        )
        children.start(f"worker-{index}", [sys.executable, "-m", "codepool", "worker"], env)


def start_gateway(children: Children, options: ServeOptions, redis_url: str) -> None:
    """The gateway process."""
    argv = [sys.executable, "-m", "codepool", "gateway", "--host", options.host,
            "--port", str(options.port)]  # fmt: skip
    children.start("gateway", argv, child_env(CODEPOOL_REDIS_URL=redis_url))


def wait_ready(children: Children, url: str, timeout_s: float, workers: int) -> None:
    """Waits until the gateway answers /readyz (Redis up) and sees ``workers`` workers alive.

    /readyz alone is green with one worker: serve started ``workers`` and says so when all run.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (dead := children.exited()) is not None:
            raise RuntimeError(f"{dead[0]} exited with code {dead[1]} during start-up")
        try:
            response = httpx.get(f"{url}/readyz", timeout=1.0)
            if response.status_code == 200 and response.json()["workers"] >= workers:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"not ready after {timeout_s:.0f} s")


@dataclass
class RestartBudget:
    """At most ``limit`` restarts of one child within any ``window_s``."""

    limit: int = MAX_RESTARTS
    window_s: float = RESTART_WINDOW_S
    _times: dict[str, deque[float]] = field(default_factory=dict)

    def take(self, name: str, now_s: float) -> bool:
        """Records a restart of ``name`` at ``now_s``; False when its budget is spent."""
        times = self._times.setdefault(name, deque())
        while times and now_s - times[0] > self.window_s:
            times.popleft()
        if len(times) >= self.limit:
            return False
        times.append(now_s)
        return True


def supervise(children: Children, budget: RestartBudget | None = None) -> None:
    """Runs until a child dies more often than its budget allows (an error: serve then stops).

    A child that exits on its own (killed, say, or out of memory) is started again as it was:
    - a worker: the jobs it held are reclaimed by the live workers once idle for
      ``reclaim_idle_s``; its jails died with it;
    - Redis: it comes back empty on the same socket. The gateway answers the requests whose
      jobs were queued 503 ``queue_lost``; gateway and workers reconnect by themselves;
    - the gateway: requests it was answering fail; new ones are served again.
    """
    budget = budget or RestartBudget()
    while True:
        if (dead := children.exited()) is None:
            time.sleep(0.5)
            continue
        name, code = dead
        if not budget.take(name, time.monotonic()):
            raise RuntimeError(f"{name} exited with code {code}, too often to start it again")
        print(f"codepool: {name} exited with code {code}; starting it again",
              file=sys.stderr, flush=True)  # fmt: skip
        children.restart(name)


def serve(options: ServeOptions) -> int:
    """Runs everything until SIGINT/SIGTERM; returns the exit code."""
    run_dir = options.run_dir or Path(tempfile.mkdtemp(prefix="codepool-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    children = Children()
    previous = {sig: signal.signal(sig, _raise_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    url = f"http://{options.host}:{options.port}"
    code = 0
    try:
        redis_url = options.redis_url or start_redis(children, run_dir)
        start_workers(children, options, redis_url)
        start_gateway(children, options, redis_url)
        print(f"codepool: starting {options.workers} worker(s) x {options.slots} slot(s) "
              f"at {url} (Redis {redis_url})", flush=True)  # fmt: skip
        wait_ready(children, url, options.ready_timeout_s, options.workers)
        print(f"codepool: ready at {url}  (docs: {url}/docs; Ctrl-C stops)", flush=True)
        supervise(children)
    except Stop as stop:
        log.info("%s: stopping", stop)
    except RuntimeError as exc:
        print(f"codepool: error: {exc}", file=sys.stderr, flush=True)
        code = 1
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        _shut_down(children, options.drain_timeout_s)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if options.run_dir is None:
            shutil.rmtree(run_dir, ignore_errors=True)
    return code


def _shut_down(children: Children, drain_timeout_s: float) -> None:
    children.stop(("gateway",), grace_s=10.0)
    children.stop(("worker",), grace_s=drain_timeout_s + 10.0)
    children.stop(("redis",), grace_s=5.0)
    print("codepool: stopped", flush=True)
