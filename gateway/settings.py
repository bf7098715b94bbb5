"""Gateway settings, read from ``CODEPOOL_*`` variables and validated at start."""

from typing import Self

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from executor.settings import SandboxSettings

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class GatewaySettings(BaseSettings):
    """How the gateway admits, queues and answers work."""

    model_config = SettingsConfigDict(env_prefix="CODEPOOL_", extra="ignore")

    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis holding the queue.")
    redis_max_connections: int = Field(
        32, ge=1, le=10_000, description="Redis connections open at most; more callers queue."
    )
    redis_pool_timeout_s: float = Field(
        5.0, gt=0, le=60, description="Longest wait for a free Redis connection; then 503."
    )
    auth_token: SecretStr | None = Field(None, description="Bearer token; unset = no auth.")
    max_queue_depth: int = Field(
        250_000, ge=1, description="Jobs queued or running past which new work gets 429."
    )
    max_batch_items: int = Field(100_000, ge=1, description="Items one batch request may hold.")
    max_body_bytes: int = Field(512 * 1024 * 1024, ge=1024, description="Largest request body.")
    default_deadline_s: float = Field(600.0, gt=0, description="Deadline when none is given.")
    max_deadline_s: float = Field(3600.0, gt=0)
    start_margin_s: float = Field(
        1.0, ge=0, description="A job starts only if its time limit plus this fits the deadline."
    )
    idempotency_ttl_s: int = Field(3600, ge=1, description="How long a key recalls its result.")
    flush_max_items: int = Field(1000, ge=1, description="Most XADDs per flush (one script call).")
    flush_linger_s: float = Field(0.001, ge=0, description="Wait for more items to batch.")
    poll_interval_s: float = Field(0.5, gt=0, description="Queue depth and worker poll period.")
    worker_stale_s: float = Field(15.0, gt=0, description="Heartbeat age that counts as dead.")
    retry_after_s: int = Field(1, ge=1, description="Retry-After sent with 429 and 503.")
    codejudge_budget_s: float = Field(
        50.0, gt=0, description="code-judge calls answer within this (its clients wait 60 s)."
    )
    codejudge_queue_s: float = Field(
        4.0, gt=0, description="/run/batch and /judge/batch: items not started by then are skipped."
    )
    codejudge_timeout_s: float = Field(4.0, gt=0, description="Time limit of code-judge items.")
    codejudge_output_chars: int = Field(1000, ge=0, description="stdout/stderr kept per item.")
    environment: str = Field("development", description="development or production.")
    sandbox: SandboxSettings = Field(
        default_factory=SandboxSettings, description="Limits (CODEPOOL_SANDBOX_*)."
    )

    @model_validator(mode="after")
    def _safe(self) -> Self:
        if self.default_deadline_s > self.max_deadline_s:
            raise ValueError("default_deadline_s must not exceed max_deadline_s")
        if self.max_queue_depth < self.max_batch_items:
            raise ValueError(
                f"max_queue_depth ({self.max_queue_depth}) must be at least max_batch_items "
                f"({self.max_batch_items}), or a full-size batch could never be admitted: "
                "lower CODEPOOL_MAX_BATCH_ITEMS too"
            )
        if self.environment == "production" and self.auth_token is None:
            raise ValueError("CODEPOOL_AUTH_TOKEN is required when CODEPOOL_ENVIRONMENT=production")
        return self
