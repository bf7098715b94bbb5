"""Sandbox settings: pool shape, jail options and the server-side maxima of every limit."""

from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_PRELOAD = ["numpy", "sympy", "scipy", "math_verify"]
DEFAULT_LIGHTER_PRELOADS = [[], ["numpy"]]
DEFAULT_SANDBOX_PYTHON = Path("/opt/codepool/sandbox/bin/python3")
MAX_AUTO_SLOTS = 1024
MIB = 1024 * 1024


def available_memory_mb() -> float:
    """What this process may still use: MemAvailable, or less if its cgroup says so."""
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    available_mb = int(fields["MemAvailable"].split()[0]) / 1024
    room_bytes = _cgroup_memory_room_bytes()
    return available_mb if room_bytes is None else min(available_mb, room_bytes / MIB)


def _cgroup_memory_room_bytes() -> int | None:
    """limit - usage of our memory cgroup (v2 or v1); None when unlimited or unreadable."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2
            base, limit_file, usage_file = Path("/sys/fs/cgroup"), "memory.max", "memory.current"
        elif "memory" in controllers.split(","):
            base = Path("/sys/fs/cgroup/memory")
            limit_file, usage_file = "memory.limit_in_bytes", "memory.usage_in_bytes"
        else:
            continue
        # Inside a container the cgroup is often mounted at the root of its own namespace.
        for directory in (base / path.lstrip("/"), base):
            try:
                limit = (directory / limit_file).read_text().strip()
                usage = int((directory / usage_file).read_text())
            except OSError:
                continue
            if limit == "max" or int(limit) >= 1 << 60:
                return None
            return max(0, int(limit) - usage)
    return None


class SandboxSettings(BaseSettings):
    """How a worker runs code. Read from ``CODEPOOL_SANDBOX_*`` variables, validated at start."""

    model_config = SettingsConfigDict(env_prefix="CODEPOOL_SANDBOX_", extra="ignore")

    slots: int = Field(
        0, ge=0, le=4096, description="Concurrent jobs; 0 sizes them by available memory."
    )
    slot_budget_mb: int = Field(
        128, ge=16, description="Memory one idle slot costs (its zygotes), for sizing by memory."
    )
    memory_fraction: float = Field(
        0.8, gt=0, le=1, description="Share of available memory that auto-sized slots may plan on."
    )
    isolation: Literal["warm", "fresh"] = Field(
        "warm", description="warm: forked from a zygote per slot; fresh: a new nsjail per job."
    )
    python: Path = Field(DEFAULT_SANDBOX_PYTHON, description="Interpreter run inside the jail.")
    preload_modules: list[str] = Field(default_factory=lambda: list(DEFAULT_PRELOAD))
    lighter_preloads: list[list[str]] = Field(
        default_factory=lambda: [list(tier) for tier in DEFAULT_LIGHTER_PRELOADS],
        description=(
            "Smaller zygotes each warm slot keeps too, lightest first; a job forks from the "
            "lightest one that has every preloaded module its code names. Only proper subsets "
            "of preload_modules count. Fork and exit cost grow with the zygote's memory."
        ),
    )
    huge_pages: bool = Field(
        True,
        description="Collapse each zygote's heap into 2 MiB pages (MADV_COLLAPSE): cheaper forks.",
    )
    recycle_after_jobs: int = Field(
        1000, ge=1, description="Restart a zygote after this many jobs (spread by up to 1/4)."
    )
    uid_base: int = Field(
        200_000, ge=1000, description="Outside uid/gid of slot i is uid_base + i; never root."
    )
    cgroup: Literal["auto", "v1", "v2", "off"] = "auto"
    cgroup_parent: str = Field("codepool", pattern=r"^[A-Za-z0-9_.-]+$")
    slot_memory_overhead_mb: int = Field(
        768, ge=64, description="Cgroup headroom over the job limit: zygote, tmpfs, page cache."
    )
    start_timeout_s: float = Field(60.0, gt=0)
    kill_grace_s: float = Field(3.0, gt=0, description="Worker-side slack over a job's wall time.")

    default_timeout_s: float = Field(10.0, gt=0)
    max_timeout_s: float = Field(60.0, gt=0)
    default_memory_mb: int = Field(512, ge=16)
    max_memory_mb: int = Field(4096, ge=16)
    max_processes: int = Field(32, ge=1)
    max_file_size_mb: int = Field(16, ge=1)
    max_open_files: int = Field(256, ge=16)
    output_cap_bytes: int = Field(64 * 1024, ge=256, description="Kept per stream: head + tail.")
    output_kill_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Total output after which the job is killed."
    )
    max_code_bytes: int = Field(1024 * 1024, ge=1)
    max_stdin_bytes: int = Field(16 * 1024 * 1024, ge=0)
    max_files: int = Field(64, ge=0)

    def zygote_tiers(self) -> tuple[tuple[str, ...], ...]:
        """The preloads of a warm slot's zygotes, lightest first; the full preload is last."""
        full = tuple(self.preload_modules)
        tiers: list[tuple[str, ...]] = []
        for lighter in self.lighter_preloads:
            tier = tuple(lighter)
            if set(tier) < set(full) and tier not in tiers:
                tiers.append(tier)
        return (*tiers, full)

    @model_validator(mode="after")
    def _size_by_memory(self) -> "SandboxSettings":
        # Sleeping or I/O-bound code must not hold a core: slots are bounded by memory only.
        if self.slots == 0:
            per_slot_mb = self.slot_budget_mb + self.default_memory_mb
            usable_mb = available_memory_mb() * self.memory_fraction
            self.slots = max(1, min(MAX_AUTO_SLOTS, int(usable_mb // per_slot_mb)))
        return self

    @model_validator(mode="after")
    def _defaults_within_maxima(self) -> "SandboxSettings":
        if self.default_timeout_s > self.max_timeout_s:
            raise ValueError("default_timeout_s must not exceed max_timeout_s")
        if self.default_memory_mb > self.max_memory_mb:
            raise ValueError("default_memory_mb must not exceed max_memory_mb")
        return self


class SessionSettings(BaseSettings):
    """Live sessions on a worker. Read from ``CODEPOOL_SESSION_*`` variables."""

    model_config = SettingsConfigDict(env_prefix="CODEPOOL_SESSION_", extra="ignore")

    enabled: bool = Field(True, description="Serve sessions on this worker.")
    max_sessions: int = Field(256, ge=1, description="Live sessions per worker, forks included.")
    max_sessions_per_client: int = Field(128, ge=1)
    max_fork: int = Field(64, ge=1, description="Copies one fork request may ask for.")
    default_idle_ttl_s: float = Field(300.0, gt=0)
    max_idle_ttl_s: float = Field(3600.0, gt=0)
    spare_hosts: int = Field(1, ge=0, description="Host jails kept started for quick opens.")
    host_memory_mb: int = Field(
        8192, ge=256, description="Cgroup memory of one family's jail (a session and its forks)."
    )
    cpu_budget_s: float = Field(3600.0, gt=0, description="CPU seconds one session may use.")
    expiry_interval_s: float = Field(1.0, gt=0)
    tombstones: int = Field(10_000, ge=0, description="Ended sessions remembered for answers.")
