"""Worker settings: where the queue is, how often to beat, when to reclaim a dead peer's jobs."""

import socket

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def _default_worker_id() -> str:
    # In Kubernetes the hostname is the pod name: stable for the pod, unique in the cluster.
    return socket.gethostname()


class WorkerSettings(BaseSettings):
    """How a worker talks to Redis. Read from ``CODEPOOL_*`` variables, validated at start."""

    model_config = SettingsConfigDict(env_prefix="CODEPOOL_", extra="ignore")

    redis_url: str = Field("redis://127.0.0.1:6379/0", description="Redis holding the queue.")
    worker_id: str = Field(
        default_factory=_default_worker_id,
        pattern=r"^[A-Za-z0-9_.:-]{1,128}$",
        description="Consumer name in the group; the pod name in Kubernetes.",
    )
    metrics_port: int = Field(9100, ge=0, le=65535, description="Prometheus port; 0 disables.")
    metrics_host: str = "0.0.0.0"
    heartbeat_interval_s: float = Field(2.0, gt=0)
    heartbeat_ttl_s: float = Field(10.0, gt=0, description="Heartbeat age that counts as dead.")
    claim_block_s: float = Field(1.0, gt=0, le=10, description="Longest wait of one claim.")
    reclaim_idle_s: float = Field(
        30.0, gt=0, description="A pending job idle this long belongs to a dead worker."
    )
    max_deliveries: int = Field(3, ge=1, description="Deliveries before a job is dead-lettered.")
    drain_timeout_s: float = Field(
        90.0, gt=0, description="On SIGTERM, how long in-flight jobs may still run."
    )
    reply_ttl_s: int = Field(3600, ge=60, description="A reply stream nobody reads expires.")

    @model_validator(mode="after")
    def _consistent(self) -> "WorkerSettings":
        if self.heartbeat_ttl_s <= self.heartbeat_interval_s:
            raise ValueError("heartbeat_ttl_s must exceed heartbeat_interval_s")
        # In-flight jobs are refreshed every reclaim_idle_s / 3; a claim must not outlast that.
        if self.claim_block_s >= self.reclaim_idle_s / 3:
            raise ValueError("claim_block_s must be under a third of reclaim_idle_s")
        return self
