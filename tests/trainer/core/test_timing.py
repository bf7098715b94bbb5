"""The activity clock splits overlapping spans by priority: generate > service > other."""

import time

import pytest

from trainer.core.timing import ActivityClock


def test_overlaps_count_once_with_generation_first() -> None:
    clock = ActivityClock()
    clock.start()
    with clock.span("service"):
        time.sleep(0.10)  # service only
        with clock.span("generate"):
            time.sleep(0.10)  # both: counts as generate
    time.sleep(0.05)  # neither
    clock.stop()

    assert clock.seconds["service"] == pytest.approx(0.10, abs=0.03)
    assert clock.seconds["generate"] == pytest.approx(0.10, abs=0.03)
    assert clock.seconds["other"] == pytest.approx(0.05, abs=0.03)
    assert sum(clock.shares().values()) == pytest.approx(1.0)


def test_nothing_counts_before_start() -> None:
    clock = ActivityClock()
    with clock.span("generate"):
        time.sleep(0.01)
    assert clock.seconds["generate"] == 0.0
    assert clock.shares() == {"generate": 0.0, "service": 0.0, "other": 0.0}
