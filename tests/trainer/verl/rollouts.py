"""Random scored rollouts for RoC tests, built from ``trainer.core`` objects."""

import random
from typing import Any

from trainer.core.grpo import Rollout, make_rollout
from trainer.core.timing import ActivityClock
from trainer.core.tools import CallOutcome, ToolCallRecord
from trainer.core.trajectory import Finish, Trajectory
from trainer.core.verify import Score, Verdict
from trainer.verl.output import build_output

OUTCOME_WEIGHTS = {CallOutcome.OK: 6, CallOutcome.ERROR: 2, CallOutcome.TIMEOUT: 1,
                   CallOutcome.INVALID_CALL: 1}  # fmt: skip


def random_rollout(rng: random.Random, correct_rate: float) -> Rollout:
    """A rollout with random tool outcomes, answer tags, finish and reward."""
    trajectory = Trajectory(prompt_ids=[rng.randrange(200) for _ in range(rng.randint(3, 9))])
    calls = rng.choices(
        list(OUTCOME_WEIGHTS), weights=list(OUTCOME_WEIGHTS.values()), k=rng.randint(0, 3)
    )
    for outcome in calls:
        trajectory.append([rng.randrange(200) for _ in range(rng.randint(1, 6))], trained=True)
        trajectory.turn_texts.append("<tool_call>{}</tool_call>")
        trajectory.tool_calls.append(ToolCallRecord(outcome, latency_s=0.01))
        trajectory.append([rng.randrange(200) for _ in range(rng.randint(1, 6))], trained=False)
    answers = rng.choice([0, 1, 1, 1, 2])
    trajectory.append([rng.randrange(200) for _ in range(rng.randint(1, 6))], trained=True)
    trajectory.turn_texts.append(r"<answer>\boxed{1}</answer>" * answers)
    trajectory.finish = rng.choices(
        [Finish.DONE, Finish.TRUNCATED, Finish.SERVICE_FAILED], weights=[18, 1, 1]
    )[0]
    reward = float(rng.random() < correct_rate)
    return make_rollout(
        trajectory, Score(reward, Verdict.CORRECT if reward else Verdict.WRONG, "integer")
    )


def random_groups(rng: random.Random, groups: int, size: int) -> list[list[Rollout]]:
    """``groups`` prompt groups of ``size`` rollouts with varied success rates."""
    return [[random_rollout(rng, rng.random()) for _ in range(size)] for _ in range(groups)]


async def to_batch(worker: Any, groups: list[list[Rollout]]) -> Any:
    """The groups as verl's worker would hand them to the trainer, one uid per group."""
    import numpy as np

    outputs = []
    uids = []
    for number, group in enumerate(groups):
        for rollout in group:
            output = build_output(rollout, None, ActivityClock())
            outputs.append(await worker._agent_loop_postprocess(output, False, raw_prompt=[]))
            uids.append(f"prompt-{number}")
    batch = worker._postprocess(outputs)
    batch.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    return batch
