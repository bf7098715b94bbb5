"""The worker's side of a zygote's job and result frames (layouts: ``executor/jail/protocol``).

The zygote passes on what it does not need to read, so the meaning is given here, outside the
jail: the child's report or the wait status becomes an exit code, a signal and a status, and
the captured bytes become text with a marker where the middle of a stream was dropped.
"""

import asyncio
import math
import os
import signal
from typing import Any

import orjson

from executor.framing import MAX_FRAME_BYTES, FrameError
from executor.jail.capture import render
from executor.jail.protocol import FRAME, JOB_FIELDS_BYTES, JOB_HEAD, REPORT, RESULT, TASK, VERDICTS
from executor.jobs import Execution, Status
from executor.limits import SandboxJob

KIB = 1024


def _encode_text(text: str, errors: str) -> bytes:
    try:
        return text.encode("utf-8", errors)
    except UnicodeEncodeError:  # a lone surrogate that "surrogateescape" has no byte for
        return text.encode("utf-8", "surrogatepass")


def encode_job(job: SandboxJob) -> bytes:
    """The job frame: the zygote's header and stdin, then the child's task."""
    limits = job.limits
    stdin = _encode_text(job.stdin, "surrogateescape")
    code = _encode_text(job.code, "surrogatepass")
    files = orjson.dumps(job.files) if job.files else b""
    task = TASK.pack(
        limits.cpu_time_s, limits.memory_bytes, limits.processes, limits.file_size_bytes,
        limits.open_files, job.echo_last_expr, len(code), len(files),
    )  # fmt: skip
    frame_bytes = JOB_FIELDS_BYTES + len(stdin) + len(task) + len(code) + len(files)
    head = JOB_HEAD.pack(
        frame_bytes, limits.timeout_s, limits.output_cap_bytes, limits.output_kill_bytes,
        len(stdin),
    )  # fmt: skip
    return b"".join((head, stdin, task, code, files))


async def read_result(reader: asyncio.StreamReader) -> bytes:
    """One result frame's body; raises FrameError on EOF, an absurd length or a short body."""
    try:
        (size,) = FRAME.unpack(await reader.readexactly(FRAME.size))
        if not RESULT.size <= size <= MAX_FRAME_BYTES:
            raise FrameError(f"result frame of {size} bytes")
        return await reader.readexactly(size)
    except asyncio.IncompleteReadError as exc:
        raise FrameError("zygote closed its pipe") from exc


def decode_result(body: bytes, cpu_time_s: float) -> Execution:
    """The execution a result frame describes; ``cpu_time_s``: the job's CPU limit."""
    (
        verdict, reported, report, wait_status, rusage_cpu_s, rusage_max_rss_kib, wall_s,
        out_total, out_head, out_tail, err_total, err_head, err_tail,
    ) = RESULT.unpack_from(body)  # fmt: skip
    if out_head + out_tail + err_head + err_tail != len(body) - RESULT.size:
        raise FrameError("result frame's streams do not add up")
    if verdict >= len(VERDICTS):
        raise FrameError(f"unknown verdict {verdict}")
    fields = _outcome(reported, report, wait_status, rusage_cpu_s, rusage_max_rss_kib)
    memory_error = fields.pop("memory_error")
    status = Status(VERDICTS[verdict]) if verdict else _status(fields, memory_error, cpu_time_s)
    fields.update(_streams(body, out_total, out_head, out_tail, err_total, err_head, err_tail))
    return Execution.model_construct(status=status, wall_s=wall_s, **fields)


def _outcome(
    reported: bool, report: bytes, wait_status: int, cpu_s: float, max_rss_kib: int
) -> dict[str, Any]:
    if reported:  # the child's own account (its last words, written before its teardown)
        exit_code, memory_error, cpu_s, max_rss_bytes = REPORT.unpack(report)
        if not (math.isfinite(cpu_s) and cpu_s >= 0):  # the job can write this report itself
            cpu_s = 0.0
        return {
            "exit_code": exit_code, "signal": None, "cpu_s": cpu_s,
            "max_rss_bytes": max_rss_bytes, "memory_error": memory_error,
        }  # fmt: skip
    if os.WIFSIGNALED(wait_status):
        exit_code, signal_name = None, _signal_name(os.WTERMSIG(wait_status))
    else:
        exit_code, signal_name = os.WEXITSTATUS(wait_status), None
    return {
        "exit_code": exit_code, "signal": signal_name, "cpu_s": cpu_s,
        "max_rss_bytes": max_rss_kib * KIB, "memory_error": False,
    }  # fmt: skip


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"SIG{number}"


def _streams(
    body: bytes, out_total: int, out_head: int, out_tail: int,
    err_total: int, err_head: int, err_tail: int,
) -> dict[str, Any]:  # fmt: skip
    view = memoryview(body)[RESULT.size :]
    bounds = [out_head, out_tail, err_head, err_tail]
    parts = []
    for size in bounds:
        parts.append(bytes(view[:size]))
        view = view[size:]
    out_kept, err_kept = out_head + out_tail, err_head + err_tail
    return {
        "stdout": render(parts[0], parts[1], out_total),
        "stderr": render(parts[2], parts[3], err_total),
        "stdout_truncated": out_total > out_kept,
        "stderr_truncated": err_total > err_kept,
    }


def _status(fields: dict[str, Any], memory_error: bool, cpu_time_s: float) -> Status:
    """A status from how the child ended, when the zygote gave no verdict of its own."""
    if memory_error:
        return Status.MEMORY_LIMIT
    name = fields["signal"]
    # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (soft + 1 s).
    if name == "SIGXCPU" or (name == "SIGKILL" and fields["cpu_s"] >= cpu_time_s):
        return Status.TIMEOUT
    if name is not None:
        return Status.KILLED
    return Status.OK if fields["exit_code"] == 0 else Status.ERROR
