"""``codepool serve``'s supervision: dead children are started again, within a budget."""

import sys

import pytest

from codepool.children import Children, child_env
from codepool.serve import RestartBudget, supervise

pytestmark = pytest.mark.timeout(60)


def exits_with(code: int) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.exit({code})"]


def test_the_budget_allows_so_many_restarts_per_window() -> None:
    budget = RestartBudget(limit=2, window_s=10.0)
    assert budget.take("worker-0", 0.0)
    assert budget.take("worker-0", 1.0)
    assert not budget.take("worker-0", 2.0)
    assert budget.take("worker-1", 2.0)  # each child has its own
    assert budget.take("worker-0", 10.5)  # the first restart has left the window


def test_a_child_that_keeps_dying_is_restarted_until_its_budget_is_spent(
    capfd: pytest.CaptureFixture[str],
) -> None:
    children = Children()
    first = children.start("worker-0", exits_with(3), child_env())
    with pytest.raises(RuntimeError, match="worker-0 exited with code 3, too often"):
        supervise(children, RestartBudget(limit=2, window_s=60.0))
    ((name, last),) = children.procs  # replaced in place, not added
    assert name == "worker-0" and last.pid != first.pid
    assert capfd.readouterr().err.count("worker-0 exited with code 3; starting it again") == 2


def test_only_the_dead_child_is_started_again(capfd: pytest.CaptureFixture[str]) -> None:
    children = Children()
    children.start("redis", [sys.executable, "-c", "import time; time.sleep(30)"], child_env())
    children.start("gateway", exits_with(4), child_env())
    try:
        with pytest.raises(RuntimeError, match="gateway exited with code 4, too often"):
            supervise(children, RestartBudget(limit=1, window_s=60.0))
        assert children.exited() == ("gateway", 4)  # Redis still runs: never restarted
        assert capfd.readouterr().err.count("starting it again") == 1
    finally:
        children.stop(("redis",), grace_s=5.0)


def test_a_running_child_is_not_started_twice() -> None:
    children = Children()
    proc = children.start(
        "worker-0", [sys.executable, "-c", "import time; time.sleep(30)"], child_env()
    )
    try:
        with pytest.raises(RuntimeError, match="still running"):
            children.restart("worker-0")
    finally:
        proc.kill()
        proc.wait()
