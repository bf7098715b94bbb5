"""The code-judge protocol: its request and response models and the mapping of our results.

``run_success`` is exit 0; ``success`` adds the stripped-output comparison when an expected
output is given; ``reason`` is one of code-judge's strings, with ``queue_timeout`` only for
work that did not start (safe to retry).
"""

import uuid
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from executor.jobs import ExecuteRequest, Status
from executor.settings import SandboxSettings

Reason = Literal["", "worker_timeout", "queue_timeout", "internal_error", "invalid_input"]

REASONS: dict[Status, Reason] = {
    Status.OK: "",
    Status.ERROR: "",
    Status.MEMORY_LIMIT: "",
    Status.OUTPUT_LIMIT: "",
    Status.KILLED: "",
    Status.TIMEOUT: "worker_timeout",
    Status.NOT_STARTED: "queue_timeout",
    Status.CANCELLED: "queue_timeout",
    Status.SANDBOX_ERROR: "internal_error",
}


def _new_id() -> str:
    return str(uuid.uuid4())


class Submission(BaseModel):
    """One code-judge submission; ``options`` is accepted and ignored, as code-judge does."""

    model_config = ConfigDict(extra="ignore")

    sub_id: str = Field(default_factory=_new_id)
    type: Literal["python", "cpp", "math"] = "python"
    options: dict[str, str] | None = None
    solution: str
    input: str | None = None
    expected_output: str | None = None


class BatchSubmission(BaseModel):
    """A code-judge batch."""

    model_config = ConfigDict(extra="ignore")

    sub_id: str = Field(default_factory=_new_id)
    type: Literal["batch"] = "batch"
    submissions: list[Submission] = Field(min_length=1)


class SubmissionResult(BaseModel):
    """One result, field for field as code-judge answers it."""

    sub_id: str
    success: bool
    run_success: bool
    cost: float
    stdout: str | None = None
    stderr: str | None = None
    reason: Reason = ""


class BatchSubmissionResult(BaseModel):
    """A batch's results, in request order."""

    sub_id: str
    results: list[SubmissionResult]


def invalid_reason(sub: Submission, limits: SandboxSettings) -> str | None:
    """Why a submission cannot run (answered ``invalid_input``), or None."""
    if sub.type != "python":
        return f"type {sub.type!r} is not supported; only python runs here"
    if len(sub.solution.encode("utf-8", "surrogatepass")) > limits.max_code_bytes:
        return f"solution exceeds {limits.max_code_bytes} bytes"
    if sub.input and len(sub.input.encode("utf-8", "surrogatepass")) > limits.max_stdin_bytes:
        return f"input exceeds {limits.max_stdin_bytes} bytes"
    return None


def to_request(sub: Submission, timeout_s: float) -> ExecuteRequest:
    """The native request a submission runs as."""
    return ExecuteRequest(code=sub.solution, stdin=sub.input or "", timeout_s=timeout_s)


def to_result(
    sub: Submission, result: dict[str, object], with_output: bool, output_chars: int
) -> SubmissionResult:
    """Maps one of our results to code-judge's shape."""
    status = Status(str(result["status"]))
    stdout, stderr = str(result.get("stdout") or ""), str(result.get("stderr") or "")
    run_success = status == Status.OK
    success = run_success and (
        sub.expected_output is None or stdout.strip() == sub.expected_output.strip()
    )
    return SubmissionResult(
        sub_id=sub.sub_id,
        success=success,
        run_success=run_success,
        cost=float(result.get("wall_s") or 0.0),  # type: ignore[arg-type]
        stdout=stdout[:output_chars] if with_output else None,
        stderr=stderr[:output_chars] if with_output else None,
        reason=REASONS[status],
    )


def invalid_result(sub: Submission, message: str, with_output: bool) -> SubmissionResult:
    """The result of a submission that could not run."""
    return SubmissionResult(
        sub_id=sub.sub_id, success=False, run_success=False, cost=0.0,
        stdout="" if with_output else None, stderr=message if with_output else None,
        reason="invalid_input",
    )  # fmt: skip
