"""Shared fixtures: real nsjail slots, each test session with outside uids of its own."""

import os

import pytest

from executor.settings import SandboxSettings


def unique_uid_base() -> int:
    """Outside uids no other concurrently running test session uses (per-uid limits are global)."""
    return 300_000 + (os.getpid() % 5_000) * 100


@pytest.fixture(scope="session")
def sandbox_settings() -> SandboxSettings:
    """Small, fast limits for tests; the real sandbox runtime and policy."""
    return SandboxSettings(
        slots=2,
        uid_base=unique_uid_base(),
        default_timeout_s=5.0,
        max_timeout_s=10.0,
        default_memory_mb=256,
        max_memory_mb=1024,
        output_cap_bytes=8192,
        output_kill_bytes=4 * 1024 * 1024,
        recycle_after_jobs=1000,
    )
