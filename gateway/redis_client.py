"""The gateway's Redis connections: bytes in and out, short timeouts, automatic reconnects."""

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

CONNECT_TIMEOUT_S = 2.0
SOCKET_TIMEOUT_S = 10.0


def connect(url: str, max_connections: int, pool_timeout_s: float) -> Redis:
    """A client for ``url`` on a pool of at most ``max_connections``; the reply listener gets
    one of its own.

    When every connection is in use a caller waits up to ``pool_timeout_s`` for one (then
    ``ConnectionError``, a ``RedisError``) instead of being refused at once.
    """
    pool = BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=pool_timeout_s,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=1),
        health_check_interval=30,
    )
    return Redis.from_pool(pool)
