"""Fixtures for the verl adapter tests: verl itself, a tiny model directory, a real codepool.

These tests need the ``verl`` extra (``make test-verl``); without it they are skipped.
"""

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed (make test-verl)")

from tests.conftest import unique_uid_base
from tests.service.stack import TEST_SANDBOX_ENV, free_port
from tests.trainer.verl.tiny_model import write_tiny_model

SERVE_START_TIMEOUT_S = 120.0


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face directory: a byte-level tokenizer with ChatML markers, a tiny Qwen2 config."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def compose() -> Any:
    """``trainer.verl.compose.compose_config`` (imports verl and hydra once)."""
    from trainer.verl.compose import compose_config

    return compose_config


@pytest.fixture(scope="session")
def codepool_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``codepool serve`` (Redis, one worker, the gateway) on a free port."""
    port = free_port()
    run_dir = tmp_path_factory.mktemp("serve")
    argv = [sys.executable, "-m", "codepool", "serve", "--port", str(port), "--workers", "1",
            "--slots", "4", "--uid-base", str(unique_uid_base() + 70),
            "--worker-metrics-port", "0", "--run-dir", str(run_dir / "run"),
            "--log-level", "warning"]  # fmt: skip
    proc = subprocess.Popen(
        argv, env={**os.environ, **TEST_SANDBOX_ENV}, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "ready at" in line:
                break
        else:
            pytest.fail(f"codepool serve exited early with {proc.wait()}")
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def make_worker(config: Any) -> Any:
    """verl's own AgentLoopWorker for ``config``, its server client set later by the test."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    return AgentLoopWorker(config, llm_client=None)


def run_async(coroutine: Any) -> Any:
    """Runs ``coroutine`` on a fresh event loop (verl's worker code is called from sync tests)."""
    return asyncio.run(coroutine)
