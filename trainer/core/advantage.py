"""Group-relative advantages (Eq. 7), over the G rollouts RoC kept."""

import math
from collections.abc import Sequence

STD_EPSILON = 1e-6


def group_advantages(rewards: Sequence[float], epsilon: float = STD_EPSILON) -> list[float]:
    """(r - mean) / (std + epsilon) with the unbiased std, as verl's GRPO computes it.

    A group of one has no spread: its advantage is 0.
    """
    count = len(rewards)
    if count < 2:
        return [0.0] * count
    mean = sum(rewards) / count
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / (count - 1))
    return [(r - mean) / (std + epsilon) for r in rewards]
