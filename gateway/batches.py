"""Batch ids: registered while a batch runs, so that it can be cancelled from any gateway."""

import uuid

from redis.exceptions import RedisError

from executor import keys
from gateway.errors import FieldError, Rejected
from gateway.plan import Window
from gateway.state import Services

# The key outlives the batch's deadline, so late claims still see a cancellation.
KEEP_AFTER_DEADLINE_S = 120


async def register_batch(services: Services, batch_id: str | None, window: Window) -> str:
    """Records the batch as active; a client-chosen id already in use is a 422."""
    batch_id = batch_id or uuid.uuid4().hex
    ttl_s = int(window.deadline_at_s - window.now_s) + KEEP_AFTER_DEADLINE_S
    try:
        fresh = await services.redis.set(keys.batch(batch_id), keys.BATCH_ACTIVE, nx=True, ex=ttl_s)
    except (RedisError, OSError) as exc:
        raise Rejected(503, "redis_unavailable", f"the queue is unavailable: {exc}",
                       services.settings.retry_after_s) from exc  # fmt: skip
    if not fresh:
        raise FieldError(["batch_id"], f"batch id {batch_id!r} is already in use")
    return batch_id


async def cancel_batch(services: Services, batch_id: str) -> bool:
    """Marks the batch cancelled; False if no such batch is known."""
    changed = await services.redis.set(
        keys.batch(batch_id), keys.BATCH_CANCELLED, xx=True, keepttl=True
    )
    return bool(changed)
