"""Gateway settings: read from CODEPOOL_* variables, refused at start when unsafe."""

import pytest
from pydantic import ValidationError

from gateway.settings import GatewaySettings


def test_redis_pool_is_sized_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEPOOL_REDIS_MAX_CONNECTIONS", "4")
    monkeypatch.setenv("CODEPOOL_REDIS_POOL_TIMEOUT_S", "0.5")
    settings = GatewaySettings()
    assert (settings.redis_max_connections, settings.redis_pool_timeout_s) == (4, 0.5)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("CODEPOOL_REDIS_MAX_CONNECTIONS", "0"),
        ("CODEPOOL_REDIS_MAX_CONNECTIONS", "many"),
        ("CODEPOOL_REDIS_POOL_TIMEOUT_S", "0"),
    ],
)
def test_unusable_redis_pool_is_refused(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ValidationError, match=name.removeprefix("CODEPOOL_").lower()):
        GatewaySettings()
