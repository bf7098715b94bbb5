"""Batch cancellation: what has not started is answered ``cancelled`` without running."""

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path
from pydantic import BaseModel

from gateway.auth import AuthDep
from gateway.batches import cancel_batch
from gateway.routes.execute import BATCH_ID_PATTERN
from gateway.state import ServicesDep

router = APIRouter(prefix="/v1", tags=["batches"], dependencies=[AuthDep])


class Cancelled(BaseModel):
    """The batch is marked cancelled; jobs already running finish."""

    batch_id: str
    status: str = "cancelled"


NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such batch (or it ended long ago)"}
}


@router.delete(
    "/batches/{batch_id}", status_code=202, response_model=Cancelled, responses=NOT_FOUND
)
async def cancel(
    batch_id: Annotated[str, Path(pattern=BATCH_ID_PATTERN)], services: ServicesDep
) -> Cancelled:
    """Stops the batch's jobs that have not started."""
    if not await cancel_batch(services, batch_id):
        raise HTTPException(404, f"no batch {batch_id!r} is running")
    return Cancelled(batch_id=batch_id)
