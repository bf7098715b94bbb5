"""``codepool bench sandbox``: warm zygote slots against per-call interpreters and jails.

Both baselines run in the same process, on the same machine, right after the warm slots:
a fresh ``python3 -c`` per call (the peer code-judge's execution model) and a fresh
``nsjail <our policy> -- python3 -c`` per call. Our own ``fresh`` isolation mode is shown too.
"""

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from codepool.bench.stats import Measurement
from executor.jail_code import StagedJailCode
from executor.jobs import Status
from executor.limits import JobLimits, SandboxJob
from executor.nsjail import JailSpec, build_command
from executor.pool import SlotPool, slot_config
from executor.settings import SandboxSettings

WORKLOADS = {
    "trivial": "print(1+1)",
    "numpy+sympy": "import numpy, sympy; print(sympy.factorint(2**32+1))",
}
TARGETS = {"trivial": 3.0, "numpy+sympy": 50.0}  # warm slot vs python3 -c, from issue 2
WARM = "warm zygote"

console = Console(width=120)
Call = Callable[[str], Awaitable[bool]]
Row = tuple[int, str, Measurement, Measurement]


async def _measure(label: str, call: Call, code: str, calls: int, concurrency: int) -> Measurement:
    """Runs ``calls`` calls of ``code`` with ``concurrency`` callers; records each latency."""
    latencies: list[float] = []
    errors = 0
    remaining = calls
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(label, total=calls)

        async def caller() -> None:
            nonlocal errors, remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                ok = await call(code)
                latencies.append(time.perf_counter() - started)
                errors += not ok
                progress.advance(task)

        started = time.perf_counter()
        await asyncio.gather(*(caller() for _ in range(concurrency)))
        wall_s = time.perf_counter() - started
    return Measurement(label, calls, wall_s, latencies, errors)


async def _each_workload(label: str, call: Call, slots: int, calls: int) -> dict[str, Measurement]:
    return {
        name: await _measure(f"{label}: {name}", call, code, calls, slots)
        for name, code in WORKLOADS.items()
    }


def _pool_call(pool: SlotPool, limits: JobLimits) -> Call:
    async def call(code: str) -> bool:
        result = await pool.run(SandboxJob(code=code, limits=limits))
        return result.status == Status.OK

    return call


def _process_call(argv_for: Callable[[str], list[str]]) -> Call:
    async def call(code: str) -> bool:
        proc = await asyncio.create_subprocess_exec(
            *argv_for(code), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
        )
        return await proc.wait() == 0

    return call


def _nsjail_argv(
    settings: SandboxSettings, slots: int, jail_code: StagedJailCode
) -> Callable[[str], list[str]]:
    """``nsjail <our policy> -- python3 -I -c CODE``: a jail and an interpreter per call."""
    config = slot_config(settings, (), jail_code)
    first_id = settings.uid_base + 20_000
    ids = itertools.cycle(range(first_id, first_id + slots))

    def argv(code: str) -> list[str]:
        spec = JailSpec(next(ids), config.memory_limit_bytes, config.pids_limit)
        return build_command(config.binary, config.python, config.cgroup, spec, ["-c", code])

    return argv


async def _pool_mode(
    settings: SandboxSettings, label: str, slots: int, calls: int
) -> dict[str, Measurement]:
    isolation = "warm" if label == WARM else "fresh"
    warm_up = isolation == "warm"
    pool = SlotPool(settings.model_copy(update={"slots": slots, "isolation": isolation}))
    await pool.start()
    try:
        call = _pool_call(pool, JobLimits.resolve(settings))
        if warm_up:  # the first calls page in the preloaded modules
            for code in WORKLOADS.values():
                await call(code)
        return await _each_workload(label, call, slots, calls)
    finally:
        await pool.stop()


def _table(rows: list[Row]) -> Table:
    table = Table(title="codepool bench sandbox: calls/s against python3 -c in the same run")
    for column in ("slots", "workload", "mode", "calls/s", "p50 ms", "p99 ms", "errors",
                   "vs python3 -c", "target"):  # fmt: skip
        table.add_column(column, justify="right")
    for slots, workload, measured, baseline in rows:
        ratio = measured.calls_per_s / baseline.calls_per_s if baseline.calls_per_s else 0.0
        verdict = ""
        if measured.label.startswith(WARM):
            target = TARGETS[workload]
            verdict = f"{target:.0f}x {'met' if ratio >= target else 'MISSED'}"
        table.add_row(
            str(slots), workload, measured.label.split(":")[0], f"{measured.calls_per_s:.1f}",
            f"{measured.percentile_ms(50):.1f}", f"{measured.percentile_ms(99):.1f}",
            str(measured.errors), f"{ratio:.1f}x", verdict,
        )  # fmt: skip
    return table


async def run(slots: int, calls: int, baseline_calls: int) -> None:
    """Measures 1 and ``slots`` slots, warm vs both baselines, and prints one table."""
    settings = SandboxSettings()
    python_call = _process_call(lambda code: [str(settings.python), "-c", code])
    rows: list[Row] = []
    for n in sorted({1, slots}):
        warm = await _pool_mode(settings, WARM, n, calls)
        fresh = await _pool_mode(settings, "fresh mode", n, baseline_calls)
        with StagedJailCode() as jail_code:
            jail_call = _process_call(_nsjail_argv(settings, n, jail_code))
            jail = await _each_workload("nsjail + python3 -c", jail_call, n, baseline_calls)
        python = await _each_workload("python3 -c", python_call, n, baseline_calls)
        for workload in WORKLOADS:
            for measured in (warm[workload], fresh[workload], jail[workload], python[workload]):
                rows.append((n, workload, measured, python[workload]))
    console.print(_table(rows))
