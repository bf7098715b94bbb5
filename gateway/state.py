"""What the app's lifespan opens and the routes use, as one typed object."""

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request
from redis.asyncio import Redis

from gateway.metrics import GatewayMetrics
from gateway.monitor import QueueMonitor
from gateway.pending import PendingResults
from gateway.sessions import SessionRouter
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
    sessions: SessionRouter
    detached: set["asyncio.Task[None]"] = field(default_factory=set)

    def detach(self, work: Coroutine[Any, Any, None]) -> None:
        """Runs ``work`` apart from the request (whose own task may be being cancelled)."""
        task = asyncio.get_running_loop().create_task(work)
        self.detached.add(task)
        task.add_done_callback(self.detached.discard)


async def get_services(request: Request) -> Services:
    """The running app's services (async: a plain function would run in a worker thread)."""
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]
