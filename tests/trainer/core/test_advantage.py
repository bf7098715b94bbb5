"""Group advantages, hand-computed."""

import math

import pytest

from trainer.core.advantage import group_advantages


def test_two_of_four_correct() -> None:
    # mean 0.5; unbiased std sqrt(4 * 0.25 / 3) = 0.57735
    expected = 0.5 / (math.sqrt(1 / 3) + 1e-6)
    assert group_advantages([1, 0, 0, 1]) == pytest.approx(
        [expected, -expected, -expected, expected]
    )


def test_three_of_four_correct() -> None:
    # mean 0.75; unbiased variance (3 * 0.0625 + 0.5625) / 3 = 0.25; std 0.5
    assert group_advantages([1, 1, 1, 0]) == pytest.approx([0.5, 0.5, 0.5, -1.5], rel=1e-5)


def test_degenerate_groups_have_zero_advantage() -> None:
    assert group_advantages([1.0]) == [0.0]
    assert group_advantages([1.0, 1.0]) == [0.0, 0.0]
    assert group_advantages([]) == []
