"""The worker's Redis connection: bytes in and out, short timeouts, automatic reconnects."""

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

CONNECT_TIMEOUT_S = 2.0
# Above the longest blocking read (claim_block_s <= 10 s), so a block never looks like a hang.
SOCKET_TIMEOUT_S = 15.0


def connect(url: str) -> Redis:
    """A client for ``url`` (redis://, rediss:// or unix://); connects lazily."""
    return Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), retries=2),
        health_check_interval=30,
    )
