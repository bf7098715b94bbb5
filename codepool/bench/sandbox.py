"""``codepool bench sandbox``: warm zygote slots against per-call interpreters and jails."""

import asyncio
import time
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from codepool.bench.stats import Measurement
from executor.jobs import Status
from executor.limits import JobLimits, SandboxJob
from executor.pool import SlotPool
from executor.settings import SandboxSettings

TRIVIAL = "print(1+1)"
SCIENTIFIC = "import numpy, sympy; print(sympy.factorint(2**32+1))"
WORKLOADS = {"trivial": TRIVIAL, "numpy+sympy": SCIENTIFIC}
TARGETS = {"trivial": 3.0, "numpy+sympy": 50.0}

console = Console()
Call = Callable[[str], Awaitable[bool]]


async def _measure(label: str, call: Call, code: str, calls: int, concurrency: int) -> Measurement:
    latencies: list[float] = []
    errors = 0
    queue: asyncio.Queue[None] = asyncio.Queue()
    for _ in range(calls):
        queue.put_nowait(None)
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(label, total=calls)

        async def runner() -> None:
            nonlocal errors
            while not queue.empty():
                queue.get_nowait()
                started = time.perf_counter()
                ok = await call(code)
                latencies.append(time.perf_counter() - started)
                errors += not ok
                progress.advance(task)

        started = time.perf_counter()
        await asyncio.gather(*(runner() for _ in range(concurrency)))
        wall_s = time.perf_counter() - started
    return Measurement(label, calls, wall_s, latencies, errors)


def _pool_call(pool: SlotPool, limits: JobLimits) -> Call:
    async def call(code: str) -> bool:
        result = await pool.run(SandboxJob(code=code, limits=limits))
        return result.status == Status.OK

    return call


def _fresh_interpreter_call(settings: SandboxSettings) -> Call:
    async def call(code: str) -> bool:
        proc = await asyncio.create_subprocess_exec(
            str(settings.python), "-c", code,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        return await proc.wait() == 0

    return call


async def _warm(settings: SandboxSettings, slots: int, calls: int) -> dict[str, Measurement]:
    pool = SlotPool(settings.model_copy(update={"slots": slots, "isolation": "warm"}))
    await pool.start()
    limits = JobLimits.resolve(settings)
    try:
        call = _pool_call(pool, limits)
        for code in WORKLOADS.values():  # warm-up: first calls page in the preloaded modules
            await call(code)
        return {
            name: await _measure(f"warm {slots} slot(s): {name}", call, code, calls, slots)
            for name, code in WORKLOADS.items()
        }
    finally:
        await pool.stop()


async def _fresh_jail(settings: SandboxSettings, slots: int, calls: int) -> dict[str, Measurement]:
    pool = SlotPool(settings.model_copy(update={"slots": slots, "isolation": "fresh"}))
    await pool.start()
    call = _pool_call(pool, JobLimits.resolve(settings))
    return {
        name: await _measure(f"fresh nsjail x{slots}: {name}", call, code, calls, slots)
        for name, code in WORKLOADS.items()
    }


async def _fresh_python(
    settings: SandboxSettings, slots: int, calls: int
) -> dict[str, Measurement]:
    call = _fresh_interpreter_call(settings)
    return {
        name: await _measure(f"python3 -c x{slots}: {name}", call, code, calls, slots)
        for name, code in WORKLOADS.items()
    }


def _table(rows: list[tuple[str, str, Measurement, Measurement]]) -> Table:
    table = Table(title="codepool bench sandbox")
    for column in ("slots", "workload", "mode", "calls/s", "p50 ms", "p99 ms", "errors",
                   "x python3 -c", "target"):  # fmt: skip
        table.add_column(column, justify="right")
    for slots, workload, measured, baseline in rows:
        ratio = measured.calls_per_s / baseline.calls_per_s if baseline.calls_per_s else 0.0
        target = TARGETS[workload] if measured.label.startswith("warm") else None
        verdict = (
            "" if target is None else f"{target:.0f}x {'met' if ratio >= target else 'MISSED'}"
        )
        table.add_row(
            slots, workload, measured.label.split(":")[0], f"{measured.calls_per_s:.1f}",
            f"{measured.percentile_ms(50):.2f}", f"{measured.percentile_ms(99):.2f}",
            str(measured.errors), f"{ratio:.1f}x", verdict,
        )  # fmt: skip
    return table


async def run(slots: int, calls: int, baseline_calls: int) -> None:
    """Measures 1 and ``slots`` slots, warm vs both baselines, and prints one table."""
    settings = SandboxSettings()
    rows: list[tuple[str, str, Measurement, Measurement]] = []
    for n in sorted({1, slots}):
        warm = await _warm(settings, n, calls)
        python = await _fresh_python(settings, n, baseline_calls)
        jail = await _fresh_jail(settings, n, baseline_calls)
        for workload in WORKLOADS:
            for measured in (warm[workload], jail[workload], python[workload]):
                rows.append((str(n), workload, measured, python[workload]))
    console.print(_table(rows))
