"""Schemathesis fuzzes the gateway's own OpenAPI schema (valid and invalid input): no 5xx."""

import itertools
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode, checks

from tests.service.conftest import Stack
from tests.service.stack import GatewayThread, gateway_settings


@pytest.fixture(scope="module")
def fuzz_gateway(stack: Stack) -> Iterator[GatewayThread]:
    # Tight deadlines and batch caps: generated work stays small and answers fast.
    settings_ = gateway_settings(
        stack.redis.url, max_batch_items=50, default_deadline_s=15.0, max_deadline_s=20.0
    )
    thread = GatewayThread(settings_).start()
    yield thread
    thread.stop()


@pytest.fixture(scope="module")
def api_schema(fuzz_gateway: GatewayThread) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_url(f"{fuzz_gateway.url}/openapi.json")


CHECKS = [
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.content_type_conformance,
]


# Schemathesis's pytest plugin does not run under pytest 9, so each operation gets its own
# hypothesis run here.
@pytest.mark.timeout(400)
def test_no_server_errors(api_schema: schemathesis.BaseSchema) -> None:
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 14

    for operation, mode in itertools.product(operations, GenerationMode):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        def check(case: schemathesis.Case) -> None:
            case.call_and_validate(checks=CHECKS, timeout=60)

        try:
            check()
        except Unsatisfiable:  # an operation without input has no invalid input to generate
            assert mode == GenerationMode.NEGATIVE
