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

# Idempotency values: a marker while the first run is in flight, then its result.
IDEMPOTENCY_PENDING = b"pending"
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


def batch(batch_id: str) -> str:
    """``active`` or ``cancelled``: workers skip the jobs of a cancelled batch."""
    return f"{PREFIX}batch:{batch_id}"
