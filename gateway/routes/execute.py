"""The native API: one call, or a batch of up to ``max_batch_items`` in request order."""

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from executor.jobs import ExecuteRequest, JobResult
from gateway.auth import AuthDep
from gateway.batches import register_batch
from gateway.errors import FieldError
from gateway.plan import check_item
from gateway.state import Services, ServicesDep
from gateway.submit import Submission

NDJSON = "application/x-ndjson"
BATCH_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"

router = APIRouter(prefix="/v1", tags=["execute"], dependencies=[AuthDep])


class BatchRequest(BaseModel):
    """Many calls at once. Item deadlines are capped by the batch's."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    items: list[ExecuteRequest] = Field(min_length=1)
    batch_id: Annotated[str, Field(pattern=BATCH_ID_PATTERN)] | None = Field(
        None, description="Your id for DELETE /v1/batches/{id}; generated when left out."
    )
    deadline_s: Annotated[float, Field(gt=0)] | None = Field(
        None, description="Seconds until the whole batch must be answered."
    )


class BatchResponse(BaseModel):
    """Results in request order."""

    batch_id: str
    results: list[JobResult]


@router.post("/execute", response_model=JobResult)
async def execute(item: ExecuteRequest, services: ServicesDep) -> Response:
    """Runs one call and answers its result (HTTP 200 whatever the code did)."""
    settings = services.settings
    check_item(item, [], settings.sandbox)
    submitter = services.submitter
    window = submitter.window(item.deadline_s or settings.default_deadline_s)
    submission = await submitter.submit([item], window, single=True)
    async for _, reply in submitter.results(submission):
        return Response(reply.raw, media_type="application/json")
    raise AssertionError("results() yields one reply per job")


@router.post(
    "/execute/batch",
    response_model=BatchResponse,
    responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}}}},
)
async def execute_batch(
    batch: BatchRequest, services: ServicesDep, accept: Annotated[str, Header()] = ""
) -> Response:
    """Runs many calls; with ``Accept: application/x-ndjson`` streams each as it completes."""
    settings = services.settings
    if len(batch.items) > settings.max_batch_items:
        raise FieldError(["items"], f"at most {settings.max_batch_items} items per batch",
                         "too_long")  # fmt: skip
    for index, item in enumerate(batch.items):
        check_item(item, ["items", index], settings.sandbox)
    submitter = services.submitter
    window = submitter.window(batch.deadline_s or settings.default_deadline_s)
    batch_id = await register_batch(services, batch.batch_id, window)
    submission = await submitter.submit(batch.items, window, batch_id)
    headers = {"X-Batch-Id": batch_id}
    if NDJSON in accept:
        return StreamingResponse(_lines(services, submission), media_type=NDJSON, headers=headers)
    ordered: list[bytes] = [b""] * len(batch.items)
    async for index, reply in submitter.results(submission):
        ordered[index] = reply.raw
    body = b'{"batch_id":"%s","results":[%s]}' % (batch_id.encode(), b",".join(ordered))
    return Response(body, media_type="application/json", headers=headers)


async def _lines(services: Services, submission: Submission) -> AsyncIterator[bytes]:
    """One JSON line per result, as each completes; ``index`` is its place in the request."""
    async for index, reply in services.submitter.results(submission, lost_as_results=True):
        yield b'{"index":%d,%s\n' % (index, reply.raw[1:])
