"""Resample-on-Correct (rStar2-Agent §2.2.3, Eq. 4-5): which rollouts of a group are trained on.

Modes:
- ``paper``: keep ⌊|neg|/2⌋ negatives uniformly at random; fill the rest of G with positives
  drawn without replacement with probability ∝ 1/(p_err + p_format).
- ``public``: the released rStar2 code: proportional counts (round half to even), at least 2 of
  each class, positives sorted by penalty, negatives in batch order; groups smaller than G are
  dropped and groups of exactly G kept whole.
- ``none``: plain GRPO: keep every rollout.

In every mode a group whose rewards are all equal is dropped (it has zero advantage).
Edge cases the report leaves open, decided here (see docs/training.md):
- odd counts: ⌊|neg|/2⌋ negatives, so positives get the extra slot (⌈|pos|/2⌉ of 2G);
- p_total = 0 (clean tool use, one answer): weight 1/0 is read as the limit of 1/ε, so such
  positives are drawn first, uniformly among themselves, before any penalised one;
- one negative: ⌊1/2⌋ = 0 negatives are kept, the selection is all-positive, and the group
  is dropped like any other uniform group (counted as ``single_negative``);
- fewer than 2G usable rollouts (service failures): the same rule on what is left, at most G.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

RocMode = Literal["paper", "public", "none"]
NO_CALL_ERROR_PENALTY = 0.5


class DropReason(StrEnum):
    """Why a group contributes nothing to the update."""

    UNIFORM = "uniform"  # all rewards equal before selection
    SINGLE_NEGATIVE = "single_negative"  # paper mode kept 0 of 1 negative
    TOO_SMALL = "too_small"  # public mode: fewer than G rollouts


@dataclass(frozen=True)
class RocSample:
    """What RoC reads of one rollout."""

    reward: float
    p_err: float
    p_format: float

    @property
    def p_total(self) -> float:
        """The penalty a positive is sampled against (range [0, 2])."""
        return self.p_err + self.p_format


@dataclass(frozen=True)
class GroupSelection:
    """Indices kept (into the group, ascending) or why the group is dropped."""

    kept: tuple[int, ...]
    dropped: DropReason | None = None


def error_penalty(num_calls: int, num_errors: int) -> float:
    """p_err (Eq. 4): erroneous calls / calls; 0.5 when the rollout made no call."""
    return NO_CALL_ERROR_PENALTY if num_calls == 0 else num_errors / num_calls


def format_penalty(num_answer_tags: int, num_turns: int) -> float:
    """p_format (Eq. 5): 1 without an answer, else min(1, (#answer - 1) / #turns)."""
    if num_answer_tags == 0:
        return 1.0
    return min(1.0, (num_answer_tags - 1) / max(1, num_turns))


def select_group(
    samples: Sequence[RocSample], group_size: int, mode: RocMode, rng: random.Random
) -> GroupSelection:
    """The rollouts of one prompt's group to train on (``group_size`` = G)."""
    if len({s.reward > 0 for s in samples}) < 2:
        return GroupSelection((), DropReason.UNIFORM)
    if mode == "none":
        return GroupSelection(tuple(range(len(samples))))
    if mode == "public":
        return _select_public(samples, group_size)
    return _select_paper(samples, group_size, rng)


def _select_paper(
    samples: Sequence[RocSample], group_size: int, rng: random.Random
) -> GroupSelection:
    negatives = [i for i, s in enumerate(samples) if s.reward <= 0]
    positives = [i for i, s in enumerate(samples) if s.reward > 0]
    keep_negatives = len(negatives) // 2
    if keep_negatives == 0:
        return GroupSelection((), DropReason.SINGLE_NEGATIVE)
    keep_positives = min(len(positives), group_size - keep_negatives)
    chosen_negatives = rng.sample(negatives, keep_negatives)
    penalties = [samples[i].p_total for i in positives]
    chosen_positives = [positives[j] for j in sample_by_penalty(penalties, keep_positives, rng)]
    return GroupSelection(tuple(sorted(chosen_negatives + chosen_positives)))


def sample_by_penalty(penalties: Sequence[float], count: int, rng: random.Random) -> list[int]:
    """``count`` indices drawn one by one without replacement, P(i) ∝ 1/penalty[i].

    Zero-penalty items have infinite weight: while any is left, the draw is uniform among them.
    """
    left = list(range(len(penalties)))
    chosen: list[int] = []
    for _ in range(min(count, len(left))):
        perfect = [i for i in left if penalties[i] <= 0]
        if perfect:
            pick = rng.choice(perfect)
        else:
            pick = rng.choices(left, weights=[1.0 / penalties[i] for i in left])[0]
        left.remove(pick)
        chosen.append(pick)
    return chosen


def _select_public(samples: Sequence[RocSample], group_size: int) -> GroupSelection:
    """rStar2's ``resample_of_correct`` counts and ordering, on our status-based penalties."""
    total = len(samples)
    if total < group_size:
        return GroupSelection((), DropReason.TOO_SMALL)
    if total == group_size:
        return GroupSelection(tuple(range(total)))
    negatives = [i for i, s in enumerate(samples) if s.reward <= 0]
    positives = sorted((i for i, s in enumerate(samples) if s.reward > 0),
                       key=lambda i: samples[i].p_total)  # fmt: skip
    num_neg, num_pos = public_counts(len(negatives), len(positives), group_size)
    return GroupSelection(tuple(sorted(positives[:num_pos] + negatives[:num_neg])))


def public_counts(
    num_negatives: int, num_positives: int, group_size: int, min_each: int = 2
) -> tuple[int, int]:
    """(negatives, positives) to keep as rStar2's released code computes them."""
    total = num_negatives + num_positives
    keep_neg = round(num_negatives * group_size / total)  # Python rounds half to even
    keep_pos = round(num_positives * group_size / total)
    if keep_neg < min_each and keep_pos < min_each:
        return num_negatives, num_positives
    if keep_neg <= min(min_each, num_negatives):
        keep_neg = min(min_each, num_negatives)
        keep_pos = group_size - keep_neg
    if keep_pos <= min(min_each, num_positives):
        keep_pos = min(min_each, num_positives)
        keep_neg = group_size - keep_pos
    return keep_neg, keep_pos
