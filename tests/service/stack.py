"""Real parts for service tests: a redis-server, worker processes, a gateway in a thread."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import redis
import uvicorn

from gateway.app import create_app
from gateway.settings import GatewaySettings
from tests.conftest import unique_uid_base

START_TIMEOUT_S = 60.0
# Test workers take outside uids after the executor tests' slots, 16 per worker.
WORKER_UID_OFFSET = 20
WORKER_UID_STRIDE = 16
TEST_SANDBOX_ENV = {
    "CODEPOOL_SANDBOX_PRELOAD_MODULES": "[]",  # trivial code needs no numpy: fast slot starts
    "CODEPOOL_SANDBOX_DEFAULT_TIMEOUT_S": "5",
    "CODEPOOL_SANDBOX_MAX_TIMEOUT_S": "10",
    "CODEPOOL_SANDBOX_DEFAULT_MEMORY_MB": "256",
    "CODEPOOL_SANDBOX_MAX_MEMORY_MB": "512",
    "CODEPOOL_SANDBOX_OUTPUT_CAP_BYTES": "8192",
}


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """A private redis-server on a unix socket, without persistence; restartable."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.socket_path = run_dir / "redis.sock"
        self.url = f"unix://{self.socket_path}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Starts it and waits for PING."""
        binary = shutil.which("redis-server") or "redis-server"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                "0",
                "--unixsocket",
                str(self.socket_path),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.run_dir),
                "--loglevel",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
        )
        client = self.client()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except (redis.RedisError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops it by pid."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=10)

    def client(self) -> "redis.Redis":
        """A synchronous client, for assertions."""
        return redis.Redis(unix_socket_path=str(self.socket_path))


@dataclass
class Workers:
    """Worker processes of one test module; each with outside uids of its own."""

    redis_url: str
    env: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, index: int, slots: int = 4, **env: str) -> subprocess.Popen[bytes]:
        """Starts worker ``index`` (its id is ``test-<index>``) and returns its process."""
        worker_id = f"test-{index}"
        uid_base = unique_uid_base() + WORKER_UID_OFFSET + index * WORKER_UID_STRIDE
        full_env = {
            **os.environ,
            **TEST_SANDBOX_ENV,
            **self.env,
            **env,
            "CODEPOOL_REDIS_URL": self.redis_url,
            "CODEPOOL_WORKER_ID": worker_id,
            "CODEPOOL_METRICS_PORT": env.get("CODEPOOL_METRICS_PORT", "0"),
            "CODEPOOL_SANDBOX_SLOTS": str(slots),
            "CODEPOOL_SANDBOX_UID_BASE": str(uid_base),
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "codepool", "worker", "--log-level", "warning"], env=full_env
        )
        self.procs[worker_id] = proc
        return proc

    def wait_alive(self, count: int) -> None:
        """Waits until ``count`` workers have a heartbeat."""
        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + START_TIMEOUT_S
        while client.hlen("cp:v1:workers") < count:
            dead = [w for w, p in self.procs.items() if p.poll() is not None]
            assert not dead, f"worker(s) exited during start: {dead}"
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.05)

    def stop_all(self) -> None:
        """SIGTERM (drain) every worker, SIGKILL after a grace period."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class GatewayThread:
    """The real app under uvicorn, in a thread with its own event loop."""

    def __init__(self, settings: GatewaySettings) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(settings)
        config = uvicorn.Config(
            self.app,
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=2,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "GatewayThread":
        """Starts serving and waits until it answers."""
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive(), "the gateway failed to start"
            assert time.monotonic() < deadline, "the gateway did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        """Asks uvicorn to exit and joins the thread."""
        self.server.should_exit = True
        self.thread.join(timeout=15)


def gateway_settings(redis_url: str, **overrides: object) -> GatewaySettings:
    """Gateway settings for tests: the same sandbox caps as the test workers."""
    from executor.settings import SandboxSettings

    sandbox = SandboxSettings(
        default_timeout_s=5,
        max_timeout_s=10,
        default_memory_mb=256,
        max_memory_mb=512,
        max_code_bytes=64 * 1024,
    )
    values: dict[str, object] = {
        "redis_url": redis_url,
        "sandbox": sandbox,
        "default_deadline_s": 60.0,
        "poll_interval_s": 0.1,
    }
    values.update(overrides)
    return GatewaySettings(**values)  # type: ignore[arg-type]


def wait_ready(url: str, timeout_s: float = START_TIMEOUT_S) -> None:
    """Waits until the gateway's /readyz is 200."""
    deadline = time.monotonic() + timeout_s
    while httpx.get(f"{url}/readyz").status_code != 200:
        assert time.monotonic() < deadline, "the gateway never became ready"
        time.sleep(0.05)
