"""RoC: penalties (Eq. 4-5), the paper's selection, the public code's, hand-computed cases."""

import random
from collections import Counter
from itertools import combinations

import pytest

from trainer.core.roc import (
    DropReason,
    RocSample,
    error_penalty,
    format_penalty,
    public_counts,
    sample_by_penalty,
    select_group,
)


def group(rewards: list[int], penalties: list[float] | None = None) -> list[RocSample]:
    penalties = penalties or [0.5] * len(rewards)
    return [RocSample(float(r), p, 0.0) for r, p in zip(rewards, penalties, strict=True)]


def test_error_penalty() -> None:
    assert error_penalty(num_calls=0, num_errors=0) == 0.5
    assert error_penalty(num_calls=4, num_errors=1) == 0.25
    assert error_penalty(num_calls=2, num_errors=2) == 1.0


def test_format_penalty() -> None:
    assert format_penalty(num_answer_tags=0, num_turns=3) == 1.0
    assert format_penalty(num_answer_tags=1, num_turns=3) == 0.0
    assert format_penalty(num_answer_tags=2, num_turns=3) == pytest.approx(1 / 3)
    assert format_penalty(num_answer_tags=3, num_turns=1) == 1.0


@pytest.mark.parametrize("mode", ["paper", "public", "none"])
def test_uniform_groups_are_dropped(mode: str) -> None:
    for rewards in ([1] * 8, [0] * 8):
        selection = select_group(group(rewards), 4, mode, random.Random(0))  # type: ignore[arg-type]
        assert selection == (selection.__class__((), DropReason.UNIFORM))


def test_paper_keeps_half_the_negatives_and_fills_with_positives() -> None:
    rewards = [1, 0, 1, 1, 0, 1, 0, 1]  # 5 positives, 3 negatives; 2G = 8, G = 4
    for seed in range(20):
        kept = select_group(group(rewards), 4, "paper", random.Random(seed)).kept
        assert len(kept) == 4
        assert sum(rewards[i] == 0 for i in kept) == 1  # floor(3 / 2)
        assert list(kept) == sorted(kept)


def test_paper_odd_counts_give_positives_the_extra_slot() -> None:
    rewards = [1] * 9 + [0] * 7  # 2G = 16: 3 negatives, 5 positives
    kept = select_group(group(rewards), 8, "paper", random.Random(0)).kept
    assert Counter(rewards[i] for i in kept) == {1: 5, 0: 3}


def test_paper_with_one_negative_leaves_a_uniform_group_and_drops_it() -> None:
    selection = select_group(group([1] * 15 + [0]), 8, "paper", random.Random(0))
    assert selection.kept == ()
    assert selection.dropped is DropReason.SINGLE_NEGATIVE


def test_paper_with_failed_rollouts_applies_the_rule_to_what_is_left() -> None:
    rewards = [1] * 3 + [0] * 8  # 11 usable of 2G = 16
    kept = select_group(group(rewards), 8, "paper", random.Random(0)).kept
    assert Counter(rewards[i] for i in kept) == {0: 4, 1: 3}


def test_paper_negatives_are_uniform() -> None:
    rewards = [1] * 4 + [0] * 4  # keep 2 of 4 negatives
    counts: Counter[int] = Counter()
    for seed in range(4000):
        kept = select_group(group(rewards), 4, "paper", random.Random(seed)).kept
        counts.update(i for i in kept if rewards[i] == 0)
    for index in range(4, 8):
        assert counts[index] / 4000 == pytest.approx(0.5, abs=0.03)


def test_positives_drawn_without_replacement_proportional_to_inverse_penalty() -> None:
    # Weights 1/p = 1, 2, 4 (sum 7). Two draws without replacement:
    # P({0,1}) = 1/7*2/6 + 2/7*1/5 = 22/210; P({0,2}) = 1/7*4/6 + 4/7*1/3 = 60/210;
    # P({1,2}) = 2/7*4/5 + 4/7*2/3 = 128/210.
    expected = {(0, 1): 22 / 210, (0, 2): 60 / 210, (1, 2): 128 / 210}
    rng = random.Random(7)
    draws = 20_000
    counts = Counter(
        tuple(sorted(sample_by_penalty([1.0, 0.5, 0.25], 2, rng))) for _ in range(draws)
    )
    for pair in combinations(range(3), 2):
        assert counts[pair] / draws == pytest.approx(expected[pair], abs=0.012)


def test_zero_penalty_positives_come_first_uniformly() -> None:
    rng = random.Random(3)
    assert all(set(sample_by_penalty([0.0, 1.0, 0.0, 0.5], 2, rng)) == {0, 2} for _ in range(200))
    third = Counter(sample_by_penalty([0.0, 1.0, 0.0, 0.5], 3, rng)[2] for _ in range(6000))
    assert third[3] / 6000 == pytest.approx(2 / 3, abs=0.03)  # weights 1/1 and 1/0.5


def test_paper_prefers_clean_positives() -> None:
    rewards = [1, 1, 1, 1, 0, 0]  # keep 1 negative and 2 of 4 positives
    penalties = [0.0, 2.0, 0.0, 2.0, 0.5, 0.5]
    kept = select_group(group(rewards, penalties), 3, "paper", random.Random(1)).kept
    assert {0, 2} <= set(kept)


@pytest.mark.parametrize(
    ("negatives", "positives", "paper", "public"),
    [(2, 30, (1, 15), (2, 14)), (15, 17, (7, 9), (8, 8)), (1, 31, None, (1, 15)),
     (31, 1, (15, 1), (15, 1)), (16, 16, (8, 8), (8, 8))],
)  # fmt: skip
def test_public_counts_differ_from_the_paper_where_the_reference_says(
    negatives: int, positives: int, paper: tuple[int, int] | None, public: tuple[int, int]
) -> None:
    assert public_counts(negatives, positives, 16) == public
    rewards = [0] * negatives + [1] * positives
    chosen = select_group(group(rewards), 16, "paper", random.Random(0))
    got = Counter(rewards[i] for i in chosen.kept)
    assert ((got[0], got[1]) if chosen.kept else None) == paper


def test_public_counts_always_fill_g_from_2g() -> None:
    for negatives in range(1, 32):
        assert sum(public_counts(negatives, 32 - negatives, 16)) == 16


def test_public_sorts_positives_by_penalty_and_takes_negatives_in_order() -> None:
    rewards = [0, 1, 1, 0, 1, 0, 1, 1]  # 3 negatives, 5 positives; G = 4 -> (2, 2)
    penalties = [9.0, 1.5, 0.5, 9.0, 0.0, 0.1, 0.5, 2.0]
    kept = select_group(group(rewards, penalties), 4, "public", random.Random(0)).kept
    assert kept == (0, 2, 3, 4)  # negatives 0, 3 (first two); positives 4 (0.0), 2 (0.5 first)


def test_public_keeps_a_group_of_exactly_g_and_drops_a_smaller_one() -> None:
    assert select_group(group([1, 0, 1, 0]), 4, "public", random.Random(0)).kept == (0, 1, 2, 3)
    small = select_group(group([1, 0, 1]), 4, "public", random.Random(0))
    assert small.dropped is DropReason.TOO_SMALL


def test_none_keeps_everything() -> None:
    assert select_group(group([1, 0, 0]), 2, "none", random.Random(0)).kept == (0, 1, 2)
