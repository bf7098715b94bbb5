"""From validated request items to queued jobs: size caps, clamped limits, start windows."""

import uuid
from dataclasses import dataclass
from pathlib import PurePosixPath

from executor.jobs import ExecuteRequest, QueuedJob
from executor.settings import SandboxSettings
from gateway.errors import FieldError

MAX_PATH_CHARS = 255


@dataclass(frozen=True)
class Window:
    """When the jobs of one request must be answered, and by when they may start.

    Times are epoch seconds. ``start_within_s`` (code-judge's short queue life) makes jobs
    start within that long of their enqueueing or be skipped as not started.
    """

    now_s: float
    deadline_at_s: float
    margin_s: float
    start_within_s: float | None = None


def check_item(item: ExecuteRequest, loc: list[str | int], limits: SandboxSettings) -> None:
    """Raises FieldError naming the field when an item is over a cap or asks for sessions."""
    if item.session_id is not None:
        raise FieldError([*loc, "session_id"],
                         "a job runs in a fresh sandbox; run cells of a session with "
                         "POST /v1/sessions/{id}/execute")  # fmt: skip
    _check_size(item.code, [*loc, "code"], limits.max_code_bytes)
    _check_size(item.stdin, [*loc, "stdin"], limits.max_stdin_bytes)
    if len(item.files) > limits.max_files:
        raise FieldError([*loc, "files"], f"at most {limits.max_files} files are allowed")
    for path, text in item.files.items():
        _check_path(path, [*loc, "files", path])
        _check_size(text, [*loc, "files", path], limits.max_code_bytes)


def _check_size(text: str, loc: list[str | int], cap_bytes: int) -> None:
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > cap_bytes:
        raise FieldError(loc, f"{size} bytes exceeds the limit of {cap_bytes}", "too_long")


def _check_path(path: str, loc: list[str | int]) -> None:
    pure = PurePosixPath(path)
    if not path or len(path) > MAX_PATH_CHARS or "\x00" in path:
        raise FieldError(loc, "a file path must be 1 to 255 characters, without NUL")
    if pure.is_absolute() or ".." in pure.parts or path.endswith("/"):
        raise FieldError(loc, "a file path must be relative, without '..', naming a file")


def timeout_of(item: ExecuteRequest, limits: SandboxSettings) -> float:
    """The item's time limit after clamping (what the worker will apply)."""
    return min(item.timeout_s or limits.default_timeout_s, limits.max_timeout_s)


def queued_job(
    item: ExecuteRequest, reply_to: str, window: Window, limits: SandboxSettings,
    batch_id: str | None, loc: list[str | int],
) -> QueuedJob:  # fmt: skip
    """The job to enqueue; raises FieldError if its deadline cannot fit its time limit."""
    timeout_s = timeout_of(item, limits)
    deadline_at_s = window.deadline_at_s
    if item.deadline_s is not None:
        deadline_at_s = min(deadline_at_s, window.now_s + item.deadline_s)
    start_by_s = deadline_at_s - timeout_s - window.margin_s
    if start_by_s <= window.now_s:
        raise FieldError([*loc, "deadline_s"],
                         f"the deadline must leave room for timeout_s ({timeout_s:g} s) plus "
                         f"{window.margin_s:g} s")  # fmt: skip
    if window.start_within_s is not None:
        start_by_s = min(start_by_s, window.now_s + window.start_within_s)
    return QueuedJob(
        id=uuid.uuid4().hex,
        reply_to=reply_to,
        code=item.code,
        stdin=item.stdin,
        files=item.files,
        echo_last_expr=item.echo_last_expr,
        timeout_s=timeout_s,
        memory_mb=min(item.memory_mb or limits.default_memory_mb, limits.max_memory_mb),
        enqueued_at_s=window.now_s,
        start_by_s=start_by_s,
        deadline_at_s=deadline_at_s,
        batch_id=batch_id,
        idempotency_key=item.idempotency_key,
    )
