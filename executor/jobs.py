"""The job contract shared by the gateway and the workers: request items and results.

These pydantic models are what travels over HTTP and through Redis. The gateway imports this
module (and ``executor.keys``) and nothing else of the executor.
"""

from enum import StrEnum
from typing import Annotated, Any, Literal

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


class SessionState(StrEnum):
    """Where a session stands. Anything but ``alive`` is final."""

    ALIVE = "alive"
    CLOSED = "closed"  # deleted by its client
    EXPIRED = "expired"  # idle past its TTL
    KILLED = "killed"  # a cell timed out, ran out of memory or flooded output
    LOST = "lost"  # the worker holding it died: state cannot be replayed


class SessionCreateRequest(BaseModel):
    """A new live interpreter. Limits left out take the server's defaults."""

    model_config = ConfigDict(extra="forbid")

    memory_mb: Annotated[int, Field(gt=0)] | None = None
    timeout_s: Annotated[float, Field(gt=0)] | None = None
    idle_ttl_s: Annotated[float, Field(gt=0)] | None = None
    client_id: Annotated[str, Field(max_length=128)] | None = None


class SessionExecuteRequest(BaseModel):
    """One cell, run in the session's persistent globals."""

    model_config = ConfigDict(extra="forbid")

    code: str
    stdin: str = ""
    timeout_s: Annotated[float, Field(gt=0)] | None = None
    echo_last_expr: bool = True


class SessionForkRequest(BaseModel):
    """``n`` independent copies of a session's state."""

    model_config = ConfigDict(extra="forbid")

    n: Annotated[int, Field(ge=1, le=256)]


class SessionInfo(BaseModel):
    """A session as clients see it."""

    id: str
    state: SessionState
    parent_id: str | None = None
    client_id: str | None = None
    cells_run: int = 0
    idle_ttl_s: float
    idle_s: float = 0.0
    memory_mb: int
    timeout_s: float


class CellResult(Execution):
    """One cell's execution, and whether the session survived it."""

    session_id: str
    session_state: SessionState


SessionOp = Literal["create", "execute", "fork", "close", "info"]


class SessionCall(BaseModel):
    """A session request on its way to the worker that holds (or will hold) the session."""

    id: str
    reply_to: str
    op: SessionOp
    session_id: str | None = None
    client_id: str | None = None
    body: dict[str, Any] = Field(default_factory=dict)
    deadline_at_s: float


class SessionReply(BaseModel):
    """A worker's answer to a SessionCall: a result, or why not (``error`` is one word)."""

    ok: bool
    result: Any = None
    error: Literal["not_found", "gone", "quota", "broken", "internal"] | None = None
    message: str = ""
    state: SessionState | None = None
