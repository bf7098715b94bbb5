"""Starts a real ``codepool serve`` on free ports and stops it by its pid (tests, benchmarks).

``CODEPOOL_SERVE_COMMAND`` may name another ``codepool`` executable (e.g. a service checkout's
venv) while this branch's own ``serve`` is not built; by default it is the one next to Python.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

READY_TIMEOUT_S = 240.0


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serve_command() -> str:
    """The ``codepool`` executable to run."""
    return os.environ.get("CODEPOOL_SERVE_COMMAND") or str(Path(sys.executable).parent / "codepool")


@contextmanager
def running_service(log_path: Path, slots: int = 8) -> Iterator[str]:
    """Yields the base URL of a ready ``codepool serve``; stops it (SIGTERM, then SIGKILL)."""
    port = free_port()
    argv = [serve_command(), "serve", "--port", str(port), "--workers", "1",
            "--slots", str(slots), "--uid-base", str(600_000 + (os.getpid() % 1000) * 100),
            "--worker-metrics-port", str(free_port()), "--log-level", "warning"]  # fmt: skip
    with log_path.open("wb") as log:
        # Outside any checkout, so the children's ``python -m codepool`` is the installed one.
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=log_path.parent)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(process, url, log_path)
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"codepool serve exited {process.returncode}: "
                               f"{log_path.read_text()[-2000:]}")  # fmt: skip
        try:
            if httpx.get(f"{url}/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"codepool serve not ready after {READY_TIMEOUT_S:.0f} s")
