"""The gateway's Redis connections: bytes in and out, short timeouts, automatic reconnects."""

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 10.0


def connect(url: str, max_connections: int = 16) -> Redis:
    """A pooled client for ``url``; the reply listener gets one of its own."""
    return Redis.from_url(
        url,
        max_connections=max_connections,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1),
        health_check_interval=30,
    )
