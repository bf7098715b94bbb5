"""The binary job and result frames: what the worker packs is what the jail side reads back."""

import os
import signal

import pytest

from executor.framing import FrameError
from executor.jail.child import read_task
from executor.jail.process import read_job
from executor.jail.protocol import OUTPUT_LIMIT, REPORT, RESULT, TIMEOUT
from executor.job_wire import decode_result, encode_job
from executor.jobs import Status
from executor.limits import JobLimits, SandboxJob
from executor.settings import SandboxSettings

LIMITS = JobLimits.resolve(SandboxSettings(), timeout_s=2.5, memory_mb=300)


def _through_a_pipe(data: bytes) -> int:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, data)
    os.close(write_fd)
    return read_fd


def test_the_zygote_and_the_child_read_back_every_field() -> None:
    job = SandboxJob(
        "print('é\udc80')", LIMITS, stdin="line\n\udcff", files={"a/b.txt": "x"},
        echo_last_expr=True,
    )  # fmt: skip
    ctrl = _through_a_pipe(encode_job(job))
    parsed = read_job(ctrl)
    assert parsed is not None
    timeout_s, cap_bytes, kill_bytes, stdin, task = parsed
    assert (timeout_s, cap_bytes, kill_bytes) == (
        2.5, LIMITS.output_cap_bytes, LIMITS.output_kill_bytes,
    )  # fmt: skip
    assert bytes(stdin) == b"line\n\xff"  # surrogate-escaped bytes go back to bytes
    assert read_job(ctrl) is None  # one frame, then EOF
    os.close(ctrl)
    child_fd = _through_a_pipe(bytes(task))
    limits, echo, code, files = read_task(child_fd)
    os.close(child_fd)
    assert limits == [
        LIMITS.cpu_time_s, LIMITS.memory_bytes, LIMITS.processes, LIMITS.file_size_bytes,
        LIMITS.open_files,
    ]  # fmt: skip
    assert (echo, code, files) == (True, "print('é\udc80')", {"a/b.txt": "x"})


def test_a_stdin_surrogate_without_a_byte_is_passed_through() -> None:
    ctrl = _through_a_pipe(encode_job(SandboxJob("", LIMITS, stdin="\ud800")))
    parsed = read_job(ctrl)
    os.close(ctrl)
    assert parsed is not None and bytes(parsed[3]) == "\ud800".encode("utf-8", "surrogatepass")


Stream = tuple[bytes, bytes, int]  # head, tail, total bytes
NOTHING: Stream = (b"", b"", 0)


def _result(
    *, verdict: int = 0, report: bytes | None = None, wait_status: int = 0,
    stdout: Stream = NOTHING, stderr: Stream = NOTHING,
) -> bytes:  # fmt: skip
    head = RESULT.pack(
        verdict, report is not None, report or b"", wait_status, 0.25, 2048, 0.5,
        stdout[2], len(stdout[0]), len(stdout[1]), stderr[2], len(stderr[0]), len(stderr[1]),
    )  # fmt: skip
    return head + stdout[0] + stdout[1] + stderr[0] + stderr[1]


def test_a_report_gives_exit_code_cpu_and_rss() -> None:
    body = _result(report=REPORT.pack(3, False, 0.125, 10 << 20), stdout=(b"hi\n", b"", 3))
    result = decode_result(body, LIMITS.cpu_time_s)
    assert (result.status, result.exit_code, result.signal) == (Status.ERROR, 3, None)
    assert (result.cpu_s, result.max_rss_bytes, result.wall_s) == (0.125, 10 << 20, 0.5)
    assert (result.stdout, result.stdout_truncated) == ("hi\n", False)


@pytest.mark.parametrize("forged_cpu_s", [float("nan"), float("inf"), -1.0])
def test_a_forged_report_cannot_give_an_impossible_cpu_time(forged_cpu_s: float) -> None:
    # The report pipe is open while the job runs: a job can write a report of its own.
    body = _result(report=REPORT.pack(0, False, forged_cpu_s, 1))
    assert decode_result(body, LIMITS.cpu_time_s).cpu_s == 0.0


def test_a_memory_error_report_is_memory_limit() -> None:
    body = _result(report=REPORT.pack(1, True, 0.1, 1))
    assert decode_result(body, LIMITS.cpu_time_s).status == Status.MEMORY_LIMIT


@pytest.mark.parametrize(
    ("sig", "cpu_time_s", "status"),
    [
        (signal.SIGSEGV, 10.0, Status.KILLED),
        (signal.SIGXCPU, 10.0, Status.TIMEOUT),
        (signal.SIGKILL, 0.2, Status.TIMEOUT),  # past its CPU limit (0.25 s used)
        (signal.SIGKILL, 10.0, Status.KILLED),
    ],
)
def test_a_wait_status_gives_the_signal(sig: int, cpu_time_s: float, status: Status) -> None:
    result = decode_result(_result(wait_status=sig), cpu_time_s)
    assert (result.status, result.exit_code, result.signal) == (status, None, sig.name)
    assert (result.cpu_s, result.max_rss_bytes) == (0.25, 2048 * 1024)


def test_an_exit_status_without_a_report() -> None:
    result = decode_result(_result(wait_status=4 << 8), LIMITS.cpu_time_s)
    assert (result.status, result.exit_code, result.signal) == (Status.ERROR, 4, None)


def test_the_zygotes_verdict_wins() -> None:
    timeout = decode_result(_result(verdict=TIMEOUT, wait_status=signal.SIGKILL), 10.0)
    assert (timeout.status, timeout.signal) == (Status.TIMEOUT, "SIGKILL")
    flood = _result(verdict=OUTPUT_LIMIT, report=REPORT.pack(0, False, 0.1, 1))
    assert decode_result(flood, 10.0).status == Status.OUTPUT_LIMIT


def test_dropped_middle_is_marked() -> None:
    result = decode_result(_result(stderr=(b"ab", b"yz", 10)), LIMITS.cpu_time_s)
    assert result.stderr == "ab\n[... codepool: 6 bytes truncated ...]\nyz"
    assert result.stderr_truncated


def test_a_frame_whose_lengths_do_not_add_up_is_refused() -> None:
    body = _result(stdout=(b"abc", b"", 3))
    with pytest.raises(FrameError):
        decode_result(body[:-1], LIMITS.cpu_time_s)
    with pytest.raises(FrameError):
        decode_result(b"\x07" + body[1:], LIMITS.cpu_time_s)  # no such verdict
