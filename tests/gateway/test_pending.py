"""Waiting for results: a second result for a job is dropped, a lost queue fails waiters."""

import pytest

from executor.jobs import JobResult, Status
from gateway.errors import QueueLost
from gateway.pending import PendingResults, Reply


def reply(job_id: str) -> Reply:
    return Reply.of(JobResult(id=job_id, status=Status.OK, stdout="1\n"))


async def test_result_is_delivered_once() -> None:
    pending = PendingResults()
    future = pending.add("a")
    assert pending.resolve(reply("a"))
    assert not pending.resolve(reply("a"))  # the re-run's result
    assert not pending.resolve(reply("nobody"))
    assert (await future).as_dict()["stdout"] == "1\n"
    assert len(pending) == 0


async def test_fail_all() -> None:
    pending = PendingResults()
    future = pending.add("a")
    assert pending.fail_all(QueueLost()) == 1
    with pytest.raises(QueueLost):
        await future
