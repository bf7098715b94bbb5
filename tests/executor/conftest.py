"""Fixtures for sandbox tests: one real warm slot, shared by a module's tests."""

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from executor.jobs import Execution
from executor.limits import JobLimits, SandboxJob
from executor.pool import SlotPool
from executor.settings import SandboxSettings

RunCode = Callable[..., Awaitable[Execution]]


@pytest.fixture(scope="module")
async def one_slot(sandbox_settings: SandboxSettings) -> AsyncIterator[SlotPool]:
    """A pool of exactly one warm slot: every job of the module runs in the same jail."""
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 1}))
    await pool.start()
    yield pool
    await pool.stop()


@pytest.fixture
def run_code(one_slot: SlotPool) -> RunCode:
    """Runs code in the shared slot with optional limits and stdin."""

    async def run(
        code: str,
        *,
        timeout_s: float | None = None,
        memory_mb: int | None = None,
        stdin: str = "",
        files: dict[str, str] | None = None,
        echo_last_expr: bool = False,
    ) -> Execution:
        limits = JobLimits.resolve(one_slot.settings, timeout_s=timeout_s, memory_mb=memory_mb)
        job = SandboxJob(code, limits, stdin, files or {}, echo_last_expr)
        return await one_slot.run(job)

    return run
