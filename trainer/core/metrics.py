"""Per-step rollout metrics, namespaced ``rollout/``, ``tool/``, ``answer/``, ``roc/``.

``tool/error_ratio_in_correct`` is the report's Figure 4 quantity: erroneous tool calls over
all tool calls, pooled over the correctly answered rollouts the policy sampled (before RoC).
"""

import statistics
from collections.abc import Sequence

from trainer.core.grpo import Rollout, Selection
from trainer.core.tools import CallOutcome
from trainer.core.trajectory import Finish
from trainer.core.verify import Verdict


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def error_ratio(rollouts: Sequence[Rollout]) -> float:
    """Erroneous calls / calls, pooled over ``rollouts`` (0 when none called a tool)."""
    calls = sum(len(r.trajectory.tool_calls) for r in rollouts)
    return _ratio(sum(r.trajectory.num_tool_errors for r in rollouts), calls)


def rollout_metrics(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Reward, length, finish reasons and answer format over every sampled rollout."""
    usable = [r for r in rollouts if r.trajectory.usable]
    n = len(usable)
    finishes = [r.trajectory.finish for r in usable]
    return {
        "rollout/count": float(len(rollouts)),
        "rollout/reward_mean": _mean([r.reward for r in usable]),
        "rollout/turns_mean": _mean([r.trajectory.num_turns for r in usable]),
        "rollout/response_tokens_mean": _mean([len(r.trajectory.response_ids) for r in usable]),
        "rollout/truncated_ratio": _ratio(finishes.count(Finish.TRUNCATED), n),
        "rollout/max_turns_ratio": _ratio(finishes.count(Finish.MAX_TURNS), n),
        "rollout/service_failed_ratio": _ratio(len(rollouts) - n, len(rollouts)),
        "answer/none_ratio": _ratio(sum(r.answer_tags == 0 for r in usable), n),
        "answer/one_ratio": _ratio(sum(r.answer_tags == 1 for r in usable), n),
        "answer/multiple_ratio": _ratio(sum(r.answer_tags > 1 for r in usable), n),
        "answer/verify_timeouts": float(sum(r.score.verdict is Verdict.TIMEOUT for r in usable)),
    }


def tool_metrics(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Calls per rollout, error ratios (all, inside correct rollouts), outcomes, latency."""
    usable = [r for r in rollouts if r.trajectory.usable]
    records = [c for r in usable for c in r.trajectory.tool_calls]
    latencies_s = [c.latency_s for c in records if c.outcome is not CallOutcome.INVALID_CALL]
    metrics = {
        "tool/calls_per_rollout": _ratio(len(records), len(usable)),
        "tool/error_ratio": error_ratio(usable),
        "tool/error_ratio_in_correct": error_ratio([r for r in usable if r.reward > 0]),
        "tool/latency_s_mean": _mean(latencies_s),
        "tool/latency_s_p95": _p95(latencies_s),
        "tool/service_wall_s_mean": _mean([c.service_wall_s for c in records]),
        "tool/service_queue_s_mean": _mean([c.service_queue_s for c in records]),
    }
    for outcome in CallOutcome:
        count = sum(c.outcome is outcome for c in records)
        metrics[f"tool/outcome_{outcome.value}_ratio"] = _ratio(count, len(records))
    return metrics


def _p95(values: Sequence[float]) -> float:
    if len(values) < 2:
        return values[0] if values else 0.0
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def selection_metrics(selection: Selection) -> dict[str, float]:
    """Groups dropped (and why), and what RoC kept."""
    metrics = {
        "roc/groups": float(selection.groups),
        "roc/dropped_ratio": _ratio(sum(selection.dropped.values()), selection.groups),
        "roc/kept_rollouts": float(len(selection.kept)),
        "roc/kept_reward_mean": _mean([r.reward for r in selection.kept]),
        "roc/kept_error_ratio_in_correct": error_ratio([r for r in selection.kept if r.reward]),
        "roc/kept_p_total_correct_mean": _mean(
            [r.roc.p_total for r in selection.kept if r.reward > 0]
        ),
    }
    for reason, count in selection.dropped.items():
        metrics[f"roc/dropped_{reason.value}"] = float(count)
    return metrics
