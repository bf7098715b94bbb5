"""Our statuses as code-judge's verdicts and reason strings."""

import pytest

from executor.jobs import Status
from executor.settings import SandboxSettings
from gateway.codejudge import REASONS, Submission, invalid_reason, to_result


def result(status: Status, stdout: str = "", wall_s: float = 0.25) -> dict[str, object]:
    return {"status": status.value, "stdout": stdout, "stderr": "", "wall_s": wall_s}


def test_every_status_has_a_reason() -> None:
    assert set(REASONS) == set(Status)
    assert REASONS[Status.NOT_STARTED] == "queue_timeout"
    assert REASONS[Status.TIMEOUT] == "worker_timeout"
    assert REASONS[Status.SANDBOX_ERROR] == "internal_error"


@pytest.mark.parametrize(
    ("status", "stdout", "expected", "verdict"),
    [
        (Status.OK, " 42\n", "42", (True, True)),
        (Status.OK, "41\n", "42", (False, True)),
        (Status.OK, "anything", None, (True, True)),
        (Status.ERROR, "42", "42", (False, False)),
        (Status.TIMEOUT, "", None, (False, False)),
    ],
)
def test_success_and_run_success(
    status: Status, stdout: str, expected: str | None, verdict: tuple[bool, bool]
) -> None:
    sub = Submission(solution="x", expected_output=expected)
    mapped = to_result(sub, result(status, stdout), with_output=True, output_chars=1000)
    assert (mapped.success, mapped.run_success) == verdict
    assert mapped.cost == 0.25
    assert mapped.sub_id == sub.sub_id


def test_output_is_cut_and_judge_hides_it() -> None:
    sub = Submission(solution="x")
    assert to_result(sub, result(Status.OK, "y" * 50), True, 10).stdout == "y" * 10
    hidden = to_result(sub, result(Status.OK, "y"), False, 10)
    assert (hidden.stdout, hidden.stderr) == (None, None)


def test_invalid_input() -> None:
    limits = SandboxSettings(max_code_bytes=10)
    assert invalid_reason(Submission(solution="1", type="cpp"), limits)
    assert invalid_reason(Submission(solution="1" * 11), limits)
    assert invalid_reason(Submission(solution="1"), limits) is None
