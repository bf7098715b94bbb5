"""Turning request items into queued jobs: caps, clamping and start windows."""

import pytest

from executor.jobs import ExecuteRequest
from executor.settings import SandboxSettings
from gateway.errors import FieldError
from gateway.plan import Window, check_item, queued_job

LIMITS = SandboxSettings(
    default_timeout_s=5,
    max_timeout_s=10,
    default_memory_mb=256,
    max_memory_mb=512,
    max_code_bytes=100,
    max_files=2,
)


def test_limits_are_clamped_and_defaulted() -> None:
    window = Window(now_s=1000.0, deadline_at_s=1100.0, margin_s=1.0)
    job = queued_job(
        ExecuteRequest(code="1", timeout_s=99, memory_mb=10**6), "r", window, LIMITS, None, []
    )
    assert (job.timeout_s, job.memory_mb) == (10, 512)
    assert job.start_by_s == 1100.0 - 10 - 1.0
    default = queued_job(ExecuteRequest(code="1"), "r", window, LIMITS, "b", [])
    assert (default.timeout_s, default.memory_mb, default.batch_id) == (5, 256, "b")


def test_item_deadline_caps_the_window_and_must_fit_the_timeout() -> None:
    window = Window(now_s=0.0, deadline_at_s=100.0, margin_s=1.0)
    job = queued_job(
        ExecuteRequest(code="1", timeout_s=2, deadline_s=10), "r", window, LIMITS, None, []
    )
    assert (job.deadline_at_s, job.start_by_s) == (10.0, 7.0)
    with pytest.raises(FieldError) as caught:
        queued_job(
            ExecuteRequest(code="1", timeout_s=2, deadline_s=3),
            "r",
            window,
            LIMITS,
            None,
            ["items", 4],
        )
    assert caught.value.loc == ["items", 4, "deadline_s"]


def test_short_queue_life_moves_start_by_earlier() -> None:
    window = Window(now_s=0.0, deadline_at_s=50.0, margin_s=1.0, start_within_s=4.0)
    assert queued_job(ExecuteRequest(code="1"), "r", window, LIMITS, None, []).start_by_s == 4.0


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (ExecuteRequest(code="x" * 101), "code"),
        (ExecuteRequest(code="é" * 51), "code"),  # bytes, not characters
        (ExecuteRequest(code="1", files={"a": "1", "b": "2", "c": "3"}), "files"),
        (ExecuteRequest(code="1", files={"a/../../b": "1"}), "files"),
        (ExecuteRequest(code="1", files={"dir/": "1"}), "files"),
        (ExecuteRequest(code="1", session_id="s"), "session_id"),
    ],
)
def test_bad_items_name_their_field(item: ExecuteRequest, field: str) -> None:
    with pytest.raises(FieldError) as caught:
        check_item(item, ["items", 0], LIMITS)
    assert caught.value.loc[:3] == ["items", 0, field]


def test_good_item_passes() -> None:
    check_item(ExecuteRequest(code="print(1)", files={"d/a.txt": "x"}), [], LIMITS)
