"""The job contract shared by the gateway and the workers: request items and results.

These pydantic models are what travels over HTTP and through Redis. The gateway imports this
module (and ``executor.keys``) and nothing else of the executor.
"""

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Status(StrEnum):
    """How a job ended. Workload failures are statuses, never exceptions."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    NOT_STARTED = "not_started"
    CANCELLED = "cancelled"
    SANDBOX_ERROR = "sandbox_error"

    @property
    def retry_safe(self) -> bool:
        """True when the code did not run to a verdict of its own, so running it again is safe."""
        return self in (Status.NOT_STARTED, Status.SANDBOX_ERROR)


class Language(StrEnum):
    """Languages the sandbox runs."""

    PYTHON = "python"


class ExecuteRequest(BaseModel):
    """One call as a client sends it. Limits left out take the server's defaults."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    code: str
    language: Language = Language.PYTHON
    stdin: str = ""
    timeout_s: Annotated[float, Field(gt=0)] | None = None
    memory_mb: Annotated[int, Field(gt=0)] | None = None
    files: dict[str, str] = Field(default_factory=dict)
    session_id: str | None = None
    idempotency_key: Annotated[str, Field(max_length=256)] | None = None
    deadline_s: Annotated[float, Field(gt=0)] | None = None
    echo_last_expr: bool = False


class Execution(BaseModel):
    """What the sandbox reports about one run of the code."""

    status: Status
    exit_code: int | None = None
    signal: str | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    max_rss_bytes: int | None = None


class JobResult(Execution):
    """A result as clients receive it: the execution plus its id and time spent queued."""

    id: str
    queue_s: float = 0.0


class QueuedJob(BaseModel):
    """A job as it travels on the job stream: limits already clamped, times as epoch seconds.

    ``start_by_s`` is the latest moment a worker may start it: late enough that its whole time
    limit still fits before ``deadline_at_s``. A worker that claims it later answers
    ``not_started`` without running it, so the gateway can answer at the deadline knowing the
    job will not run afterwards.
    """

    id: str
    reply_to: str
    code: str
    stdin: str = ""
    files: dict[str, str] = Field(default_factory=dict)
    echo_last_expr: bool = False
    timeout_s: float
    memory_mb: int
    enqueued_at_s: float
    start_by_s: float
    deadline_at_s: float
    batch_id: str | None = None
    idempotency_key: str | None = None
