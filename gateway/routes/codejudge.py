"""code-judge compatible routes, so trainers written for it (rStar2-Agent's) work unchanged.

Every answer is HTTP 200 with results in request order, within ``codejudge_budget_s`` (its
clients give up at 60 s): what has not started by then is answered ``queue_timeout`` and will
not run later. ``/run/batch`` and ``/judge/batch`` keep code-judge's short queue life
(``codejudge_queue_s``); the long batches wait as long as the budget allows.
"""

from fastapi import APIRouter

from gateway.auth import AuthDep
from gateway.codejudge import (
    BatchSubmission,
    BatchSubmissionResult,
    Submission,
    SubmissionResult,
    invalid_reason,
    invalid_result,
    to_request,
    to_result,
)
from gateway.state import Services, ServicesDep

router = APIRouter(tags=["code-judge"])
protected = APIRouter(tags=["code-judge"], dependencies=[AuthDep])


async def judge_all(
    services: Services, subs: list[Submission], with_output: bool, long: bool
) -> list[SubmissionResult]:
    """Runs the valid submissions, answers the invalid ones, keeps request order."""
    settings = services.settings
    results: list[SubmissionResult | None] = [None] * len(subs)
    runnable: list[int] = []
    for index, sub in enumerate(subs):
        problem = invalid_reason(sub, settings.sandbox)
        if problem is None:
            runnable.append(index)
        else:
            results[index] = invalid_result(sub, problem, with_output)
    if runnable:
        submitter = services.submitter
        start_within_s = None if long else settings.codejudge_queue_s
        window = submitter.window(settings.codejudge_budget_s, start_within_s)
        timeout_s = min(settings.codejudge_timeout_s, settings.sandbox.max_timeout_s)
        items = [to_request(subs[i], timeout_s) for i in runnable]
        submission = await submitter.submit(items, window)
        async for position, reply in submitter.results(submission):
            index = runnable[position]
            results[index] = to_result(subs[index], reply.as_dict(), with_output,
                                       settings.codejudge_output_chars)  # fmt: skip
    return [r for r in results if r is not None]


@router.get("/ping")
async def ping() -> str:
    """code-judge's liveness check."""
    return "pong"


@protected.get("/status")
async def status(services: ServicesDep) -> dict[str, int]:
    """Queue length and live workers, in code-judge's field names."""
    state = services.monitor.state
    return {"queue": state.depth + state.pending, "num_workers": state.workers}


async def _one(services: Services, sub: Submission, with_output: bool) -> SubmissionResult:
    (result,) = await judge_all(services, [sub], with_output, long=False)
    return result


async def _batch(
    services: Services, batch: BatchSubmission, with_output: bool, long: bool
) -> BatchSubmissionResult:
    results = await judge_all(services, batch.submissions, with_output, long)
    return BatchSubmissionResult(sub_id=batch.sub_id, results=results)


@protected.post("/run", response_model=SubmissionResult)
async def run(sub: Submission, services: ServicesDep) -> SubmissionResult:
    """Runs one submission; stdout and stderr included."""
    return await _one(services, sub, with_output=True)


@protected.post("/judge", response_model=SubmissionResult)
async def judge(sub: Submission, services: ServicesDep) -> SubmissionResult:
    """Runs one submission; verdict only."""
    return await _one(services, sub, with_output=False)


@protected.post("/run/batch", response_model=BatchSubmissionResult)
async def run_batch(batch: BatchSubmission, services: ServicesDep) -> BatchSubmissionResult:
    """A batch with code-judge's short queue life."""
    return await _batch(services, batch, with_output=True, long=False)


@protected.post("/judge/batch", response_model=BatchSubmissionResult)
async def judge_batch(batch: BatchSubmission, services: ServicesDep) -> BatchSubmissionResult:
    """A batch with code-judge's short queue life; verdicts only."""
    return await _batch(services, batch, with_output=False, long=False)


@protected.post("/run/long-batch", response_model=BatchSubmissionResult)
async def run_long_batch(batch: BatchSubmission, services: ServicesDep) -> BatchSubmissionResult:
    """A batch answered within the budget, whatever its size (what rStar2-Agent calls)."""
    return await _batch(services, batch, with_output=True, long=True)


@protected.post("/judge/long-batch", response_model=BatchSubmissionResult)
async def judge_long_batch(batch: BatchSubmission, services: ServicesDep) -> BatchSubmissionResult:
    """A long batch; verdicts only."""
    return await _batch(services, batch, with_output=False, long=True)
