"""Limits: defaults, clamping to server maxima, settings validation."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from executor.limits import MIB, JobLimits
from executor.settings import SandboxSettings


def test_defaults_apply_when_the_request_says_nothing() -> None:
    settings = SandboxSettings(default_timeout_s=7, default_memory_mb=300)
    limits = JobLimits.resolve(settings)
    assert (limits.timeout_s, limits.cpu_time_s, limits.memory_bytes) == (7, 7, 300 * MIB)


def test_requests_are_clamped_to_the_maxima() -> None:
    settings = SandboxSettings(max_timeout_s=20, max_memory_mb=1024)
    limits = JobLimits.resolve(settings, timeout_s=10_000, memory_mb=10**6)
    assert (limits.timeout_s, limits.memory_bytes) == (20, 1024 * MIB)
    smaller = JobLimits.resolve(settings, timeout_s=0.5, memory_mb=64)
    assert (smaller.timeout_s, smaller.memory_bytes) == (0.5, 64 * MIB)


def test_unsafe_settings_are_refused() -> None:
    with pytest.raises(ValidationError, match="uid_base"):
        SandboxSettings(uid_base=0)  # never root outside the jail
    with pytest.raises(ValidationError, match="default_timeout_s"):
        SandboxSettings(default_timeout_s=100, max_timeout_s=10)
    with pytest.raises(ValidationError, match="slots"):
        SandboxSettings(slots=-1)


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEPOOL_SANDBOX_SLOTS", "12")
    monkeypatch.setenv("CODEPOOL_SANDBOX_ISOLATION", "fresh")
    settings = SandboxSettings()
    assert (settings.slots, settings.isolation) == (12, "fresh")


def test_slots_are_sized_by_memory_when_not_given() -> None:
    small = SandboxSettings(slots=0, default_memory_mb=256, slot_budget_mb=100)
    large = SandboxSettings(slots=0, default_memory_mb=2048, slot_budget_mb=100)
    assert small.slots > large.slots >= 1
    assert small.slots >= 2 * large.slots - 1  # ~6x the memory per slot, far fewer slots
    assert SandboxSettings(slots=7).slots == 7


def _memory_cgroup_dir() -> Path | None:
    v1 = Path("/sys/fs/cgroup/memory")
    if v1.is_dir() and os.access(v1, os.W_OK):
        return v1
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and os.access(v2, os.W_OK):
        return v2
    return None


def test_auto_sizing_respects_the_cgroup_memory_limit() -> None:
    root = _memory_cgroup_dir()
    if root is None:
        pytest.skip("no writable memory cgroup on this host")
    group = root / f"codepool-test-{os.getpid()}"
    group.mkdir()
    limit_file = "memory.limit_in_bytes" if root.name == "memory" else "memory.max"
    try:
        (group / limit_file).write_text(str(2 * 1024**3))
        script = "from executor.settings import SandboxSettings; print(SandboxSettings().slots)"
        env = {**os.environ, "CODEPOOL_SANDBOX_DEFAULT_MEMORY_MB": "512"}
        shell = f'echo $$ > {group}/cgroup.procs && exec {sys.executable} -c "{script}"'
        slots = int(subprocess.run(["sh", "-c", shell], env=env, capture_output=True,
                                   text=True, check=True).stdout)  # fmt: skip
        assert 1 <= slots <= 2  # (2 GiB - usage) * 0.8 / (100 + 512) MiB
    finally:
        group.rmdir()
