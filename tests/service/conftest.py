"""Fixtures: one real stack (Redis, two workers, the gateway) per test module."""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.service.stack import GatewayThread, RedisServer, Workers, gateway_settings, wait_ready


@dataclass
class Stack:
    """A running service."""

    redis: RedisServer
    workers: Workers
    gateway: GatewayThread

    @property
    def url(self) -> str:
        """The gateway's base URL."""
        return self.gateway.url


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """A fresh redis-server for the module."""
    server = RedisServer(Path(tmp_path_factory.mktemp("redis")))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def stack(redis_server: RedisServer) -> Iterator[Stack]:
    """Redis, two workers of four slots and a gateway with test limits."""
    workers = Workers(redis_server.url)
    gateway = GatewayThread(gateway_settings(redis_server.url, max_batch_items=5000)).start()
    try:
        workers.start(0)
        workers.start(1)
        workers.wait_alive(2)
        wait_ready(gateway.url)
        yield Stack(redis_server, workers, gateway)
    finally:
        gateway.stop()
        workers.stop_all()
