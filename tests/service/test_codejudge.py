"""code-judge compatibility: request and response shapes, reason strings, order, budget."""

import time

import httpx
import pytest

from tests.service.conftest import Stack
from tests.service.stack import GatewayThread, gateway_settings

pytestmark = pytest.mark.timeout(90)
RESULT_FIELDS = {"sub_id", "success", "run_success", "cost", "stdout", "stderr", "reason"}


def test_ping_and_status(stack: Stack) -> None:
    assert httpx.get(f"{stack.url}/ping").json() == "pong"
    status = httpx.get(f"{stack.url}/status").json()
    assert set(status) == {"queue", "num_workers"}
    assert status["num_workers"] == 2


def test_long_batch_shapes_reasons_and_order(stack: Stack) -> None:
    submissions = [
        {"type": "python", "solution": "print(input())", "input": "7", "expected_output": "7\n"},
        {"type": "python", "solution": "print(8)", "input": None, "expected_output": "9"},
        {"type": "python", "solution": "import sys; sys.exit(2)"},
        {"type": "python", "solution": "while True: pass"},
        {"type": "cpp", "solution": "int main() {}"},
        {"solution": "print('x' * 5000)", "options": {"anything": "ignored"}},
        {"type": "python", "solution": "raise ValueError('boom')", "sub_id": "mine"},
    ]
    body = {"type": "batch", "submissions": submissions}
    response = httpx.post(f"{stack.url}/run/long-batch", json=body, timeout=60)
    assert response.status_code == 200
    data = response.json()
    assert set(data) == {"sub_id", "results"}
    results = data["results"]
    assert len(results) == len(submissions)
    assert all(set(r) == RESULT_FIELDS for r in results)
    verdicts = [(r["success"], r["run_success"], r["reason"]) for r in results]
    assert verdicts == [
        (True, True, ""),
        (False, True, ""),
        (False, False, ""),
        (False, False, "worker_timeout"),
        (False, False, "invalid_input"),
        (True, True, ""),
        (False, False, ""),
    ]
    assert 3.5 < results[3]["cost"] < 6  # code-judge's 4 s limit
    assert len(results[5]["stdout"]) == 1000  # code-judge's output cap
    assert "ValueError: boom" in results[6]["stderr"]
    assert results[6]["sub_id"] == "mine"


def test_single_run_and_judge(stack: Stack) -> None:
    run = httpx.post(f"{stack.url}/run", json={"solution": "print(2+2)"}, timeout=30).json()
    assert set(run) == RESULT_FIELDS
    assert (run["run_success"], run["stdout"]) == (True, "4\n")
    judged = httpx.post(
        f"{stack.url}/judge", json={"solution": "print(2+2)", "expected_output": "4"}, timeout=30
    ).json()
    assert (judged["success"], judged["stdout"], judged["stderr"]) == (True, None, None)
    batch = httpx.post(
        f"{stack.url}/judge/batch", json={"submissions": [{"solution": "print(1)"}] * 3}, timeout=30
    ).json()
    assert [r["success"] for r in batch["results"]] == [True] * 3


def test_schema_violations_are_422(stack: Stack) -> None:
    assert httpx.post(f"{stack.url}/run/batch", json={"submissions": []}).status_code == 422
    assert httpx.post(f"{stack.url}/run", json={"solution": 3}).status_code == 422
    assert httpx.post(f"{stack.url}/run", json={"input": "x"}).status_code == 422


def test_long_batch_answers_within_budget_marking_queue_timeout(stack: Stack) -> None:
    settings = gateway_settings(stack.redis.url, codejudge_budget_s=4.0, codejudge_timeout_s=1.0)
    short = GatewayThread(settings).start()
    try:
        # 8 slots, 1 s each, a 4 s budget (starts allowed until ~2 s): 16-24 run, the rest wait.
        subs = [{"solution": "import time; time.sleep(0.9); print(1)"}] * 48
        started = time.monotonic()
        response = httpx.post(f"{short.url}/run/long-batch", json={"submissions": subs}, timeout=30)
        elapsed_s = time.monotonic() - started
    finally:
        short.stop()
    reasons = [r["reason"] for r in response.json()["results"]]
    assert elapsed_s < 4.0 + 0.5
    assert set(reasons) == {"", "queue_timeout"}
    assert reasons.count("") >= 8
    assert all(r["run_success"] for r in response.json()["results"] if r["reason"] == "")
