"""The per-trajectory fields the agent loop returns and RoC reads: one name each, here.

verl turns each key of ``AgentLoopOutput.extra_fields`` into a column of the batch's
``non_tensor_batch``, so these are structured numbers (counts from result statuses), never
text to search.
"""

from typing import Any

from trainer.core.grpo import Rollout
from trainer.core.tools import CallOutcome

REWARD = "codepool_reward"
P_ERR = "codepool_p_err"
P_FORMAT = "codepool_p_format"
USABLE = "codepool_usable"
PADDING = "codepool_padding"
TURNS = "codepool_turns"
FINISH = "codepool_finish"
ANSWER_TAGS = "codepool_answer_tags"
TOOL_CALLS = "codepool_tool_calls"
TOOL_ERRORS = "codepool_tool_errors"
TOOL_LATENCY_S = "codepool_tool_latency_s"
RESPONSE_TOKENS = "codepool_response_tokens"
OUTCOME_PREFIX = "codepool_calls_"  # + CallOutcome value: calls that ended that way
VERL_SCORE = "acc"  # reward_extra_info key: verl names validation scores after it


def outcome_field(outcome: CallOutcome) -> str:
    """The column counting calls with ``outcome``."""
    return OUTCOME_PREFIX + outcome.value


def trajectory_fields(rollout: Rollout) -> dict[str, Any]:
    """The structured statistics of one scored rollout."""
    trajectory = rollout.trajectory
    calls = trajectory.tool_calls
    values: dict[str, Any] = {
        REWARD: rollout.reward,
        P_ERR: rollout.p_err,
        P_FORMAT: rollout.p_format,
        USABLE: trajectory.usable,
        PADDING: False,
        TURNS: trajectory.num_turns,
        FINISH: trajectory.finish.value,
        ANSWER_TAGS: rollout.answer_tags,
        TOOL_CALLS: len(calls),
        TOOL_ERRORS: trajectory.num_tool_errors,
        TOOL_LATENCY_S: sum(call.latency_s for call in calls),
        RESPONSE_TOKENS: len(trajectory.response_ids),
    }
    for outcome in CallOutcome:
        values[outcome_field(outcome)] = sum(call.outcome is outcome for call in calls)
    return values
