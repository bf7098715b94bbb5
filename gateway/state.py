"""What the app's lifespan opens and the routes use, as one typed object."""

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from redis.asyncio import Redis

from gateway.metrics import GatewayMetrics
from gateway.monitor import QueueMonitor
from gateway.pending import PendingResults
from gateway.settings import GatewaySettings
from gateway.submit import Submitter


@dataclass(frozen=True)
class Services:
    """The gateway's live parts, valid between lifespan start and stop."""

    settings: GatewaySettings
    redis: Redis
    pending: PendingResults
    monitor: QueueMonitor
    submitter: Submitter
    metrics: GatewayMetrics
    gateway_id: str


def get_services(request: Request) -> Services:
    """The running app's services."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
