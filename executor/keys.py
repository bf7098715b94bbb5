"""Every Redis key and stream name codepool uses, under one versioned prefix.

The gateway and the workers both import this module; nothing else names a key.
"""

PREFIX = "cp:v1:"

JOBS_STREAM = PREFIX + "jobs"
"""All jobs, one entry each (field ``job``); acknowledged entries are deleted."""

WORKERS_GROUP = "workers"
"""The consumer group every worker reads ``JOBS_STREAM`` through."""

DEAD_LETTER_STREAM = PREFIX + "dead"
"""Jobs delivered too many times without a result, kept for inspection."""

WORKERS_HASH = PREFIX + "workers"
"""Worker id -> JSON ``{"slots", "busy", "seen_s"}``, written with every heartbeat."""

# Entry fields: short, because a reply stream carries one entry per job.
JOB_FIELD = "job"
REPLY_ID_FIELD = "id"
REPLY_STATUS_FIELD = "s"
REPLY_RESULT_FIELD = "r"

# Idempotency values: a claim naming the job while the first run is in flight, then its result.
IDEMPOTENCY_PENDING = b"pending:"
IDEMPOTENCY_RESULT_PREFIX = b"result:"

BATCH_ACTIVE = "active"
BATCH_CANCELLED = "cancelled"


def reply_stream(gateway_id: str) -> str:
    """The stream one gateway process reads its results from."""
    return f"{PREFIX}replies:{gateway_id}"


def worker_heartbeat(worker_id: str) -> str:
    """A key with a TTL that exists while the worker is alive (``codepool worker --check``)."""
    return f"{PREFIX}worker:{worker_id}"


def gateway_marker(gateway_id: str) -> str:
    """A key with a TTL a gateway refreshes; if it vanishes, Redis lost its data."""
    return f"{PREFIX}gateway:{gateway_id}"


def idempotency(key: str) -> str:
    """Holds the first run's result for a client's idempotency key."""
    return f"{PREFIX}idem:{key}"


def idempotency_claim(job_id: str) -> bytes:
    """The value of an idempotency key while job ``job_id``, its first run, is in flight."""
    return IDEMPOTENCY_PENDING + job_id.encode()


def batch(batch_id: str) -> str:
    """``active`` or ``cancelled``: workers skip the jobs of a cancelled batch."""
    return f"{PREFIX}batch:{batch_id}"


SESSION_CALL_FIELD = "call"


def session_route(session_id: str) -> str:
    """Where a live session is: ``<worker id> <incarnation>``, with a TTL refreshed on use."""
    return f"{PREFIX}session:{session_id}"


def worker_session_calls(worker_id: str) -> str:
    """The stream of session calls for one worker (sessions live in one worker's jails)."""
    return f"{PREFIX}session-calls:{worker_id}"
