"""Trainer fixtures: a real ``codepool serve`` for the tests that talk to the service."""

from collections.abc import Iterator

import pytest

from codepool.bench.local_service import running_service


@pytest.fixture(scope="session")
def codepool_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of a ready service, shared by the session's service tests."""
    log_path = tmp_path_factory.mktemp("serve") / "serve.log"
    with running_service(log_path) as url:
        yield url
