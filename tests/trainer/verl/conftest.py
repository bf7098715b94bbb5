"""Fixtures for the verl adapter tests: verl itself and a tiny model directory.

A real ``codepool serve`` comes from ``tests/trainer/conftest.py`` (``codepool_url``). These
tests need the ``verl`` extra (``make test-verl``); without it they are skipped.
"""

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl", reason="the verl extra is not installed (make test-verl)")

from tests.trainer.verl.tiny_model import write_tiny_model


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Hugging Face directory: a byte-level tokenizer with ChatML markers, a tiny Qwen2 config."""
    return write_tiny_model(tmp_path_factory.mktemp("tiny_model"))


@pytest.fixture(scope="session")
def compose() -> Any:
    """``trainer.verl.compose.compose_config`` (imports verl and hydra once)."""
    from trainer.verl.compose import compose_config

    return compose_config


def make_worker(config: Any) -> Any:
    """verl's own AgentLoopWorker for ``config``, its server client set later by the test."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    return AgentLoopWorker(config, llm_client=None)


def run_async(coroutine: Any) -> Any:
    """Runs ``coroutine`` on a fresh event loop (verl's worker code is called from sync tests)."""
    return asyncio.run(coroutine)
