"""The deployment check fails on a broken tree, naming the problem: it cannot silently pass."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.conftest import REPO, Break, Check

WORKER = "k8s/base/worker/deployment.yaml"
GATEWAY = "k8s/base/gateway/deployment.yaml"
SCALEDOBJECT = "k8s/base/worker/scaledobject.yaml"
RULES = "deploy/monitoring/prometheusrule.yaml"
DASHBOARD = "deploy/monitoring/codepool-overview.json"

# step -> breakages that step must catch: (file, old text, new text, what the report must say).
# All of a step's breakages go into one copy, and each must be reported.
BREAKAGES = {
    "schemas": [
        (GATEWAY, "terminationGracePeriodSeconds: 70", "terminationGracePeriodSecond: 70",
         "'terminationGracePeriodSecond' was unexpected"),
        (SCALEDOBJECT, 'lagCount: "4"', "lagCount: 4", "4 is not of type 'string'"),
        ("k8s/base/worker/podmonitor.yaml", "podMetricsEndpoints:", "podMetricEndpoints:",
         "'podMetricEndpoints' was unexpected"),
    ],
    "policy": [
        (WORKER, "privileged: false", "privileged: true",
         "Deployment/worker container worker: privileged"),
        (WORKER, '"SYS_CHROOT"]', '"SYS_CHROOT", "NET_ADMIN"]', "capabilities added"),
        (WORKER, "terminationGracePeriodSeconds: 120", "terminationGracePeriodSeconds: 30",
         "terminationGracePeriodSeconds 30 < longest job 60 s"),
        (GATEWAY, "automountServiceAccountToken: false", "automountServiceAccountToken: true",
         "Deployment/gateway: automountServiceAccountToken is not false"),
        ("k8s/base/gateway/servicemonitor.yaml", "- port: http", "- port: metrics",
         "ServiceMonitor/gateway: port 'metrics' is not a named port"),
        (SCALEDOBJECT, "stream: cp:v1:jobs\n        consumerGroup: workers\n        lagCount",
         "stream: cp:v1:job\n        consumerGroup: workers\n        lagCount",
         "not cp:v1:jobs/workers"),
        (SCALEDOBJECT, 'pendingEntriesCount: "3"', 'pendingEntriesCount: "4"',
         "pendingEntriesCount 4 >= 4 slots"),
        ("k8s/base/redis/configmap.yaml", "maxmemory-policy noeviction",
         "maxmemory-policy allkeys-lru", "not noeviction"),
        ("k8s/base/kustomization.yaml", "namespace: codepool", "namespace: sandbox",
         "is not a Service of namespace 'sandbox'"),
    ],
    "rules": [
        (RULES, "rate(codepool_job_queue_wait_seconds_bucket[5m])",
         "rate(codepool_job_queue_wait_bucket[5m])",
         "unknown metric 'codepool_job_queue_wait_bucket'"),
        (RULES, "            ) > 30\n", "            ) > 300\n", "alertname: CodepoolLatencyHigh"),
    ],
    "dashboard": [
        (DASHBOARD, 'status=\\"sandbox_error\\"', 'status=\\"sandbox_eror\\"',
         "has no value 'sandbox_eror'"),
        (DASHBOARD, 'count(codepool_worker_slots_idle{namespace=\\"$namespace\\"})',
         "count(codepool_worker_slots_idle)",
         "codepool_worker_slots_idle has no namespace matcher"),
        # an unclosed grouping clause: only promtool's parser can say what is wrong
        (DASHBOARD, "histogram_quantile(0.99, sum by (le, route)",
         "histogram_quantile(0.99, sum by (le, route", 'in grouping opts, expected "," or ")"'),
    ],
    "yaml": [
        ("k8s/base/gateway/service.yaml", "  name: gateway\n",
         "  name: gateway\n  name: gateway2\n", "duplication of key"),
    ],
    "images": [
        ("deploy/Dockerfile", "WORKDIR /src\n", "WORKDIR /src\nRUN cd /src && ls\n", "DL3003"),
        ("deploy/entrypoint.sh", 'exec codepool "$@"', "exec codepool $@", "SC2068"),
        ("deploy/compose.yaml", "stop_grace_period: 120s", "stop_grace_periods: 120s",
         "stop_grace_periods"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("step", list(BREAKAGES))
def test_a_broken_tree_fails(check: Check, break_file: Break, step: str) -> None:
    for path, old, new, _ in BREAKAGES[step]:
        break_file(path, old, new)
    rc, report = check(step)
    assert rc == 1, report
    assert f"{step}: FAILED" in report
    for *_, expected in BREAKAGES[step]:
        assert expected in report, f"{expected!r} not reported:\n{report}"


def test_the_unbroken_copy_passes(check: Check) -> None:
    """The control for every case above: the copy itself is clean."""
    rc, report = check("schemas", "policy", "overlays", "rules", "dashboard")
    assert rc == 0, report


def test_overlays_keep_their_promises(check: Check, break_file: Break) -> None:
    break_file("k8s/overlays/trainer/kustomization.yaml", "  - path: job.yaml\n", "")
    break_file(
        "k8s/overlays/dev/gateway-horizontalpodautoscaler.yaml", "maxReplicas: 1", "maxReplicas: 3"
    )
    rc, report = check("overlays", targets=("dev", "trainer"))
    assert rc == 1
    assert "trainer: no container asks for amd.com/gpu" in report
    assert "dev: HorizontalPodAutoscaler/gateway may scale to 3, not 1" in report


def test_a_render_failure_fails_every_later_step(check: Check, break_file: Break) -> None:
    break_file(
        "k8s/base/kustomization.yaml", "  - gateway/service.yaml\n", "  - gateway/missing.yaml\n"
    )
    rc, report = check("render", "schemas", "policy")
    assert rc == 1
    assert "render: FAILED" in report
    assert report.count("not checked: rendering failed") == 2


def test_the_command_exits_nonzero(tree: Path, break_file: Break) -> None:
    break_file(WORKER, "privileged: false", "privileged: true")
    argv = ["--root", str(tree), "--only", "policy", "--targets", "base"]
    done = subprocess.run(
        [sys.executable, "-m", "deploy.check", *argv], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "privileged" in done.stdout


def test_a_target_missing_a_resource_fails(check: Check, break_file: Break) -> None:
    """Rules over resources that are gone would pass vacuously; their absence is a failure."""
    break_file("k8s/base/kustomization.yaml", "  - worker/scaledobject.yaml\n", "")
    rc, report = check("overlays")
    assert rc == 1
    assert "base: no ScaledObject/worker" in report


def test_a_worker_without_a_slot_count_fails(check: Check, break_file: Break) -> None:
    """Auto-sized slots would read the node's memory, not the pod's limit."""
    break_file(WORKER, '            - name: CODEPOOL_SANDBOX_SLOTS\n              value: "4"\n', "")
    rc, report = check("policy")
    assert rc == 1
    assert "set CODEPOOL_SANDBOX_SLOTS (> 0)" in report
