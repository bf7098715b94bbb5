"""A scored rollout as verl's ``AgentLoopOutput``: ids, the loss mask, the reward, the fields."""

from collections.abc import Sequence
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

from trainer.core.grpo import Rollout
from trainer.core.timing import ActivityClock
from trainer.verl.fields import VERL_SCORE, trajectory_fields
from trainer.verl.generator import response_logprobs


def tool_turns(loss_mask: Sequence[int]) -> int:
    """Runs of tool tokens (mask 0) in the response: the tool-response turns appended."""
    runs = 0
    previous = 1
    for trained in loss_mask:
        runs += previous == 1 and trained == 0
        previous = trained
    return runs


def build_output(
    rollout: Rollout, turn_logprobs: Sequence[Sequence[float]] | None, clock: ActivityClock
) -> AgentLoopOutput:
    """verl's record of one rollout; the reward goes on its last response token (verl's rule)."""
    trajectory = rollout.trajectory
    fields: dict[str, Any] = trajectory_fields(rollout)
    fields["reward_extra_info"] = {VERL_SCORE: rollout.reward}  # verl logs it per sample
    return AgentLoopOutput(
        prompt_ids=list(trajectory.prompt_ids),
        response_ids=list(trajectory.response_ids),
        response_mask=list(trajectory.loss_mask),
        response_logprobs=response_logprobs(trajectory.loss_mask, turn_logprobs),
        reward_score=rollout.reward,
        num_turns=1 + trajectory.num_turns + tool_turns(trajectory.loss_mask),
        metrics=AgentLoopMetrics(
            generate_sequences=clock.seconds["generate"], tool_calls=clock.seconds["service"]
        ),
        extra_fields=fields,
    )
