"""Step metrics from the batch's codepool columns, under ``trainer.core.metrics``' names.

``tool/error_ratio_in_correct`` is the report's Figure 4 quantity, over every rollout the
policy sampled (before RoC); ``roc/kept_error_ratio_in_correct`` is the same over what RoC
kept. Rows a service failure made unusable count only in ``rollout/service_failed_ratio``.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from trainer.core.tools import CallOutcome
from trainer.core.trajectory import Finish
from trainer.verl import fields
from trainer.verl.roc_step import RowSelection


def _ratio(part: float, whole: float) -> float:
    return float(part) / float(whole) if whole else 0.0


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def _error_ratio(columns: Mapping[str, Any], rows: Sequence[int]) -> float:
    calls = sum(int(columns[fields.TOOL_CALLS][r]) for r in rows)
    return _ratio(sum(int(columns[fields.TOOL_ERRORS][r]) for r in rows), calls)


def rollout_metrics(columns: Mapping[str, Any], rewards: Sequence[float]) -> dict[str, float]:
    """Reward, turns, finish reasons and tool use over the rollouts sampled this step."""
    total = len(rewards)
    usable = [r for r in range(total) if bool(columns[fields.USABLE][r])]
    correct = [r for r in usable if rewards[r] > 0]
    finishes = [str(columns[fields.FINISH][r]) for r in usable]
    calls = sum(int(columns[fields.TOOL_CALLS][r]) for r in usable)
    metrics = {
        "rollout/count": float(total),
        "rollout/reward_mean": _mean([rewards[r] for r in usable]),
        "rollout/turns_mean": _mean([float(columns[fields.TURNS][r]) for r in usable]),
        "rollout/truncated_ratio": _ratio(finishes.count(Finish.TRUNCATED.value), len(usable)),
        "rollout/max_turns_ratio": _ratio(finishes.count(Finish.MAX_TURNS.value), len(usable)),
        "rollout/service_failed_ratio": _ratio(total - len(usable), total),
        "tool/calls_per_rollout": _ratio(calls, len(usable)),
        "tool/error_ratio": _error_ratio(columns, usable),
        "tool/error_ratio_in_correct": _error_ratio(columns, correct),
        "tool/latency_s_mean": _ratio(
            sum(float(columns[fields.TOOL_LATENCY_S][r]) for r in usable), calls
        ),
    }
    for outcome in CallOutcome:
        count = sum(int(columns[fields.outcome_field(outcome)][r]) for r in usable)
        metrics[f"tool/outcome_{outcome.value}_ratio"] = _ratio(count, calls)
    return metrics


def selection_metrics(
    columns: Mapping[str, Any], rewards: Sequence[float], selection: RowSelection, padding: int
) -> dict[str, float]:
    """Groups dropped (and why), what RoC kept, and the no-op rows added after it."""
    kept = selection.kept
    metrics = {
        "roc/groups": float(selection.groups),
        "roc/dropped_ratio": _ratio(sum(selection.dropped.values()), selection.groups),
        "roc/kept_rollouts": float(len(kept)),
        "roc/kept_reward_mean": _mean([rewards[r] for r in kept]),
        "roc/kept_error_ratio_in_correct": _error_ratio(
            columns, [r for r in kept if rewards[r] > 0]
        ),
        "roc/kept_p_total_correct_mean": _mean(
            [
                float(columns[fields.P_ERR][r]) + float(columns[fields.P_FORMAT][r])
                for r in kept
                if rewards[r] > 0
            ]
        ),
        "roc/padding_rows": float(padding),
    }
    for reason, count in selection.dropped.items():
        metrics[f"roc/dropped_{reason.value}"] = float(count)
    return metrics
