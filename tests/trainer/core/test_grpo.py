"""From trajectories to training samples: reward rules, penalties, selection, advantages."""

import random

import pytest

from trainer.core.grpo import make_rollout, select_rollouts
from trainer.core.metrics import rollout_metrics, selection_metrics, tool_metrics
from trainer.core.tools import CallOutcome, ToolCallRecord
from trainer.core.trajectory import Finish, Trajectory
from trainer.core.verify import Score, Verdict

RIGHT = Score(1.0, Verdict.CORRECT, "integer")
WRONG = Score(0.0, Verdict.WRONG, "integer")


def trajectory(
    turns: list[str], outcomes: list[CallOutcome] = (), finish: Finish = Finish.DONE
) -> Trajectory:
    return Trajectory(
        prompt_ids=[1],
        response_ids=[2] * 10,
        loss_mask=[1] * 10,
        turn_texts=turns,
        tool_calls=[ToolCallRecord(o, latency_s=0.1) for o in outcomes],
        finish=finish,
    )


def test_penalties_of_a_rollout() -> None:
    two_answers = ["call", "<answer>\\boxed{5}</answer> again <answer>\\boxed{5}</answer>"]
    rollout = make_rollout(trajectory(two_answers, [CallOutcome.OK, CallOutcome.ERROR]), RIGHT)
    assert (rollout.reward, rollout.p_err, rollout.p_format) == (1.0, 0.5, 0.5)

    no_call = make_rollout(trajectory(["<answer>\\boxed{5}</answer>"]), RIGHT)
    assert (no_call.p_err, no_call.p_format, no_call.roc.p_total) == (0.5, 0.0, 0.5)

    unclosed = make_rollout(trajectory(["<answer>\\boxed{5}"], [CallOutcome.TIMEOUT]), WRONG)
    assert (unclosed.p_err, unclosed.p_format) == (1.0, 1.0)


def test_truncated_rollouts_score_zero() -> None:
    cut = trajectory(["<answer>\\boxed{5}</answer> and on"], finish=Finish.TRUNCATED)
    assert make_rollout(cut, RIGHT).reward == 0.0


def test_selection_skips_failed_rollouts_and_normalises_over_kept() -> None:
    good = [make_rollout(trajectory(["<answer>1</answer>"], [CallOutcome.OK]), RIGHT)] * 2
    bad = [make_rollout(trajectory(["x"]), WRONG)] * 2
    failed = make_rollout(trajectory(["x"], finish=Finish.SERVICE_FAILED), WRONG)
    uniform = [make_rollout(trajectory(["x"]), WRONG)] * 4
    selection = select_rollouts([good + bad + [failed], uniform], 4, "none", random.Random(0))

    assert selection.groups == 2
    assert len(selection.samples) == 4
    assert all(s.trajectory.usable for s in selection.samples)
    expected = 0.5 / ((1 / 3) ** 0.5 + 1e-6)
    assert [s.advantage for s in selection.samples] == pytest.approx(
        [expected, expected, -expected, -expected]
    )
    metrics = selection_metrics(selection)
    assert metrics["roc/dropped_uniform"] == 1.0
    assert metrics["roc/dropped_ratio"] == 0.5


def test_error_ratio_inside_correct_rollouts_is_pooled_over_calls() -> None:
    rollouts = [
        make_rollout(trajectory(["a"], [CallOutcome.OK, CallOutcome.ERROR, CallOutcome.OK]), RIGHT),
        make_rollout(trajectory(["b"], [CallOutcome.INVALID_CALL]), RIGHT),
        make_rollout(trajectory(["c"], [CallOutcome.ERROR, CallOutcome.ERROR]), WRONG),
        make_rollout(trajectory(["d"], finish=Finish.TRUNCATED), WRONG),
    ]
    tools = tool_metrics(rollouts)
    assert tools["tool/error_ratio_in_correct"] == pytest.approx(2 / 4)
    assert tools["tool/error_ratio"] == pytest.approx(4 / 6)
    assert tools["tool/calls_per_rollout"] == pytest.approx(6 / 4)
    assert tools["tool/outcome_invalid_call_ratio"] == pytest.approx(1 / 6)
    assert tools["tool/latency_s_mean"] == pytest.approx(0.1)
    rollout = rollout_metrics(rollouts)
    assert rollout["rollout/reward_mean"] == 0.5
    assert rollout["rollout/truncated_ratio"] == 0.25
    assert rollout["answer/none_ratio"] == 1.0
