"""Metric references found in PromQL, and what the contract says of them."""

import pytest

from deploy.check import promql
from tests.deploy.conftest import REPO

CONTRACT = promql.Contract.load(REPO / "deploy/monitoring/metrics.yaml")


def test_selectors_and_grouping_are_found() -> None:
    found = promql.usage(
        'histogram_quantile(0.9, sum by (le, namespace) (rate(a_bucket{x="1", y=~"b|c"}[5m])))'
        " / on (namespace) group_left sum(b) without (pod) > bool 2 or vector(0) offset 1m"
    )
    assert found.selectors == [
        promql.Selector("a_bucket", (("x", "=", "1"), ("y", "=~", "b|c"))),
        promql.Selector("b", ()),
    ]
    assert found.grouping_labels == {"le", "namespace", "pod"}


def test_strings_ranges_and_grafana_intervals_are_not_metrics() -> None:
    found = promql.usage(
        'label_replace(rate(a[$__rate_interval]), "dst", "$1", "src", "(.*)") * 1e3'
    )
    assert [s.name for s in found.selectors] == ["a"]


@pytest.mark.parametrize(
    ("expr", "problem"),
    [
        ("rate(codepool_jobs_totl[5m])", "unknown metric 'codepool_jobs_totl'"),
        ("rate(codepool_job_execution_seconds[5m])", "a histogram: use _bucket, _sum or _count"),
        ('codepool_jobs_total{status="oops"}', "has no value 'oops'"),
        ('codepool_jobs_total{status=~"ok|oops"}', "has no value 'oops'"),
        ('codepool_queue_depth{status="ok"}', "codepool_queue_depth has no label 'status'"),
        ("sum by (reason) (codepool_jobs_total)", "groups by 'reason'"),
        ('codepool_job_queue_wait_seconds_sum{le="1"}', "has no label 'le'"),
    ],
)
def test_contract_problems(expr: str, problem: str) -> None:
    assert any(problem in p for p in promql.problems(expr, CONTRACT)), promql.problems(
        expr, CONTRACT
    )


@pytest.mark.parametrize(
    "expr",
    [
        "sum by (namespace, le) (rate(codepool_job_end_to_end_seconds_bucket[5m]))",
        'codepool_jobs_total{status=~"sandbox_.*"}',  # a real regex is left alone
        "sum by (job, version) (codepool_build_info)",
        'sum(codepool_worker_jobs_total{namespace="$namespace", status="timeout"})',
    ],
)
def test_valid_expressions_pass(expr: str) -> None:
    assert promql.problems(expr, CONTRACT) == []
