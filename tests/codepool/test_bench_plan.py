"""The order of ``codepool bench http``: baselines measured next to what they judge."""

from codepool.bench.http import Workload, baseline_plan, plan
from codepool.bench.stats import Measurement


def test_each_target_ratio_is_judged_by_a_baseline_measured_around_it() -> None:
    steps = plan(1.0)
    judged = [(i, s) for i, s in enumerate(steps) if isinstance(s, Workload) and s.target
              and s.target.baseline]  # fmt: skip
    assert {w.target.baseline for _, w in judged if w.target} == set(baseline_plan(1.0))
    for i, w in judged:
        assert w.target is not None
        assert steps[i - 1] == steps[i + 1] == w.target.baseline, w.name


def test_every_baseline_is_measured_in_two_halves() -> None:
    steps = plan(0.05)
    assert sorted(s for s in steps if isinstance(s, str)) == sorted([*baseline_plan(0.05)] * 2)


def test_pooled_halves_add_calls_time_and_errors() -> None:
    before = Measurement("b", 10, 1.0, [0.1] * 10, errors=1)
    after = Measurement("b", 10, 3.0, [0.3] * 10)
    both = before.pooled(after)
    assert (both.calls, both.wall_s, both.errors, len(both.latencies_s)) == (20, 4.0, 1, 20)
    assert both.calls_per_s == 5.0  # not the mean of 10/s and 3.3/s
