"""Children forked without Python's at-fork hooks: fresh randomness, working threads and forks."""

import pytest

from executor.jobs import Status
from executor.pool import SlotPool
from tests.executor.conftest import RunCode

# One probe per tier: naming a module is what routes a job to the zygote that preloads it.
TIER_PREFIXES = {
    "bare": "",
    "numpy": "import numpy\n",
    "full": "import numpy, sympy\n",
}


def test_every_zygote_forks_without_hooks(one_slot: SlotPool) -> None:
    (slot,) = one_slot.slots()
    assert len(slot.zygotes) == 3
    assert [zygote.fork_hooks for zygote in slot.zygotes] == [False, False, False]


@pytest.mark.parametrize("tier", TIER_PREFIXES)
async def test_each_job_gets_fresh_random_state(run_code: RunCode, tier: str) -> None:
    code = TIER_PREFIXES[tier] + "import random; print(random.getrandbits(64))"
    if tier != "bare":
        code += "; print(numpy.random.randint(2**62))"
    outputs = [await run_code(code) for _ in range(3)]
    assert all(result.status == Status.OK for result in outputs), outputs[0].stderr
    lines = [line for result in outputs for line in result.stdout.split()]
    assert len(lines) == len(set(lines)) == (3 if tier == "bare" else 6)


THREADS_LOGGING_FORK = """
import concurrent.futures, logging, os, threading
logging.basicConfig(level=logging.INFO, format="%(threadName)s %(message)s")
done = []
worker = threading.Thread(target=lambda: done.append(threading.current_thread().name))
worker.start()
worker.join()
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    squares = sorted(pool.map(lambda n: n * n, range(8)))
logging.info("logged")
pid = os.fork()
if pid == 0:
    os._exit(7)
print(done == [worker.name], squares[-1], os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]),
      threading.main_thread() is threading.current_thread())
"""


@pytest.mark.parametrize("tier", TIER_PREFIXES)
async def test_threads_logging_and_fork_work_in_a_child(run_code: RunCode, tier: str) -> None:
    result = await run_code(TIER_PREFIXES[tier] + THREADS_LOGGING_FORK)
    assert (result.status, result.stdout) == (Status.OK, "True 49 7 True\n"), result.stderr
    assert result.stderr == "MainThread logged\n"


@pytest.mark.parametrize("tier", TIER_PREFIXES)
async def test_jobs_run_as_batch_work(run_code: RunCode, tier: str) -> None:
    # SCHED_BATCH: a job that wakes up does not preempt the worker that dispatched it.
    code = TIER_PREFIXES[tier] + "import os; print(os.sched_getscheduler(0) == os.SCHED_BATCH)"
    result = await run_code(code)
    assert (result.status, result.stdout) == (Status.OK, "True\n"), result.stderr
