"""Per-job limits: what a request asks for, clamped by the server's maxima."""

from dataclasses import dataclass, field

from executor.settings import SandboxSettings

MIB = 1024 * 1024


@dataclass(frozen=True)
class JobLimits:
    """The limits one job runs under, already clamped."""

    timeout_s: float
    cpu_time_s: float
    memory_bytes: int
    processes: int
    file_size_bytes: int
    open_files: int
    output_cap_bytes: int
    output_kill_bytes: int

    @classmethod
    def resolve(
        cls, settings: SandboxSettings, timeout_s: float | None = None, memory_mb: int | None = None
    ) -> "JobLimits":
        """Takes the request's wishes (None = default) and clamps them to the server maxima."""
        wall_s = min(timeout_s or settings.default_timeout_s, settings.max_timeout_s)
        memory = min(memory_mb or settings.default_memory_mb, settings.max_memory_mb)
        return cls(
            timeout_s=wall_s,
            cpu_time_s=wall_s,
            memory_bytes=memory * MIB,
            processes=settings.max_processes,
            file_size_bytes=settings.max_file_size_mb * MIB,
            open_files=settings.max_open_files,
            output_cap_bytes=settings.output_cap_bytes,
            output_kill_bytes=settings.output_kill_bytes,
        )


@dataclass(frozen=True)
class SandboxJob:
    """Everything a slot needs to run one job."""

    code: str
    limits: JobLimits
    stdin: str = ""
    files: dict[str, str] = field(default_factory=dict)
    echo_last_expr: bool = False
