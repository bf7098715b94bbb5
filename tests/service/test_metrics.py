"""Prometheus names the dashboard and alerts depend on, scraped from real processes."""

import time

import httpx
import pytest

from tests.service.conftest import Stack
from tests.service.stack import free_port

pytestmark = pytest.mark.timeout(90)

GATEWAY_NAMES = [
    'codepool_http_requests_total{code="200",method="POST",route="/v1/execute"}',
    'codepool_http_request_duration_seconds_bucket{le="0.001",route="/v1/execute"}',
    'codepool_jobs_total{status="ok"}',
    'codepool_jobs_total{status="error"}',
    'codepool_job_queue_wait_seconds_bucket{le="30.0"}',
    'codepool_job_execution_seconds_bucket{le="0.001"}',
    "codepool_job_end_to_end_seconds_count",
    "codepool_queue_depth",
    "codepool_queue_pending",
    "# TYPE codepool_rejections_total counter",
    'codepool_build_info{version="',
]
WORKER_NAMES = [
    'codepool_worker_jobs_total{status="ok"}',
    "codepool_worker_slots_busy",
    "codepool_worker_slots_idle 2.0",
    "codepool_sandbox_start_seconds_count 2.0",
    "# TYPE codepool_jobs_reclaimed_total counter",
    "# TYPE codepool_jobs_dead_lettered_total counter",
    "codepool_worker_execution_seconds_bucket",
    "codepool_build_info",
]


def test_gateway_metrics(stack: Stack) -> None:
    httpx.post(f"{stack.url}/v1/execute", json={"code": "print(1)"})
    httpx.post(f"{stack.url}/v1/execute", json={"code": "1/0"})
    httpx.get(f"{stack.url}/no/such/route")
    text = httpx.get(f"{stack.url}/metrics").text
    for name in GATEWAY_NAMES:
        assert name in text, name
    assert 'route="unmatched"' in text  # unknown paths do not create new label values


def test_worker_metrics(stack: Stack) -> None:
    port = free_port()
    stack.workers.start(3, slots=2, CODEPOOL_METRICS_PORT=str(port))
    stack.workers.wait_alive(3)
    for _ in range(6):
        httpx.post(f"{stack.url}/v1/execute", json={"code": "print(1)"})
    deadline = time.monotonic() + 20
    while True:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics").text
        if all(name in text for name in WORKER_NAMES) or time.monotonic() > deadline:
            break
        httpx.post(f"{stack.url}/v1/execute", json={"code": "print(1)"})
    for name in WORKER_NAMES:
        assert name in text, name
