"""From sampled groups to training samples: reward, penalties, RoC selection, advantages."""

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from trainer.core.advantage import group_advantages
from trainer.core.answer import count_answer_tags
from trainer.core.roc import (
    DropReason,
    RocMode,
    RocSample,
    error_penalty,
    format_penalty,
    select_group,
)
from trainer.core.trajectory import Finish, Trajectory
from trainer.core.verify import Score


@dataclass(frozen=True)
class Rollout:
    """A scored trajectory with its RoC penalties."""

    trajectory: Trajectory
    score: Score
    reward: float
    p_err: float
    p_format: float
    answer_tags: int

    @property
    def roc(self) -> RocSample:
        """The view RoC selects on."""
        return RocSample(self.reward, self.p_err, self.p_format)


@dataclass(frozen=True)
class TrainSample:
    """A kept rollout and its advantage (one value for all of its tokens)."""

    trajectory: Trajectory
    advantage: float
    reward: float


@dataclass
class Selection:
    """What the selection kept, and per-group outcomes for the metrics."""

    samples: list[TrainSample] = field(default_factory=list)
    kept: list[Rollout] = field(default_factory=list)
    groups: int = 0
    dropped: dict[DropReason, int] = field(default_factory=lambda: dict.fromkeys(DropReason, 0))


def make_rollout(trajectory: Trajectory, score: Score) -> Rollout:
    """Reward (0 when truncated, as in the report) and penalties of one trajectory."""
    reward = 0.0 if trajectory.finish is Finish.TRUNCATED else score.reward
    tags = count_answer_tags(trajectory.model_text)
    answers = tags.opened if tags.closed_blocks else 0
    return Rollout(
        trajectory=trajectory,
        score=score,
        reward=reward,
        p_err=error_penalty(len(trajectory.tool_calls), trajectory.num_tool_errors),
        p_format=format_penalty(answers, trajectory.num_turns),
        answer_tags=answers,
    )


def select_rollouts(
    groups: Sequence[Sequence[Rollout]], group_size: int, mode: RocMode, rng: random.Random
) -> Selection:
    """RoC on each group's usable rollouts, then advantages over what each group kept."""
    selection = Selection()
    for group in groups:
        selection.groups += 1
        usable = [rollout for rollout in group if rollout.trajectory.usable]
        chosen = select_group([r.roc for r in usable], group_size, mode, rng)
        if chosen.dropped is not None:
            selection.dropped[chosen.dropped] += 1
            continue
        kept = [usable[i] for i in chosen.kept]
        advantages = group_advantages([r.reward for r in kept])
        selection.kept.extend(kept)
        selection.samples.extend(
            TrainSample(r.trajectory, a, r.reward) for r, a in zip(kept, advantages, strict=True)
        )
    return selection
