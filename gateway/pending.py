"""Results this gateway process waits for: one future per job id, resolved by the listener."""

import asyncio
from dataclasses import dataclass

import orjson

from executor.jobs import JobResult, Status


@dataclass(frozen=True)
class Reply:
    """A job's result as it came from Redis: the raw JSON of a ``JobResult`` and its status."""

    job_id: str
    status: Status
    raw: bytes

    def as_dict(self) -> dict[str, object]:
        """The result decoded (for the code-judge mapping and tests)."""
        data: dict[str, object] = orjson.loads(self.raw)
        return data

    @classmethod
    def of(cls, result: JobResult) -> "Reply":
        """A reply made here (deadline passed, idempotent replay) rather than by a worker."""
        return cls(result.id, result.status, result.model_dump_json().encode())


class PendingResults:
    """job id -> future; a second result for the same id (a re-run) is dropped."""

    def __init__(self) -> None:
        self._futures: dict[str, asyncio.Future[Reply]] = {}

    def __len__(self) -> int:
        return len(self._futures)

    def add(self, job_id: str) -> "asyncio.Future[Reply]":
        """Registers a job before it is enqueued, so its result cannot arrive unseen."""
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._futures[job_id] = future
        return future

    def resolve(self, reply: Reply) -> bool:
        """Hands a result to its waiter; False for a duplicate or a job nobody waits for."""
        future = self._futures.pop(reply.job_id, None)
        if future is None or future.done():
            return False
        future.set_result(reply)
        return True

    def discard(self, job_ids: list[str]) -> None:
        """Stops waiting for these jobs (answered at their deadline, or never enqueued)."""
        for job_id in job_ids:
            self._futures.pop(job_id, None)

    def fail_all(self, exc: Exception) -> int:
        """Fails every waiter (Redis lost the queue); returns how many."""
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(exc)
                future.exception()  # marks it retrieved: a waiter gone already must not log it
        return len(futures)
