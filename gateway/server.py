"""Running the gateway app under uvicorn (one process; scale with replicas)."""

import uvicorn

from gateway.app import create_app
from gateway.settings import GatewaySettings


def run(settings: GatewaySettings, host: str, port: int, log_level: str = "info") -> None:
    """Serves the gateway until SIGINT or SIGTERM."""
    config = uvicorn.Config(
        create_app(settings),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        loop="uvloop",
        http="httptools",
        timeout_graceful_shutdown=5,
        backlog=4096,
    )
    uvicorn.Server(config).run()
