"""``codepool bench http``: drive a running service over HTTP and compare with the peer's model.

The baseline, measured in the same run on the same machine, is code-judge's execution model:
2 parallel runners, each starting a fresh ``python3 -c`` per call. Targets come from issue 3.

Each baseline brackets the workload whose target it decides: half of its calls right before
the workload, half right after, pooled. This VM's speed drifts by tens of percent within
minutes; measured all at the start, the baselines were up to a minute older than the last
workload they judged.
"""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import httpx
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from codepool.bench import load
from codepool.bench.stats import Measurement

TRIVIAL = "print(1+1)"
NUMPY = "import numpy as np; print(int(np.arange(1000).sum()))"
SLEEP = "import time; time.sleep(0.1)"
IDLE_PAUSE_S = 0.02
BASELINE_RUNNERS = 2

console = Console()


@dataclass(frozen=True)
class Target:
    """What a workload must reach: a ratio to a baseline workload, an idle p50, or no errors."""

    text: str
    baseline: str | None = None
    ratio: float = 0.0
    p50_ms: float | None = None

    def verdict(self, measured: Measurement, baselines: dict[str, Measurement]) -> str:
        """'met' or 'MISSED' with the figure that decides."""
        if self.p50_ms is not None:
            met = measured.percentile_ms(50) < self.p50_ms
        elif self.baseline is not None:
            met = measured.calls_per_s >= self.ratio * baselines[self.baseline].calls_per_s
        else:
            met = measured.errors == 0
        return f"{self.text}: {'met' if met else 'MISSED'}"


@dataclass(frozen=True)
class Workload:
    """One measured workload; ``baseline`` names the baseline its ratio is taken against."""

    name: str
    code: str
    calls: int
    mode: str  # "single" (with concurrency) or "batch"
    concurrency: int = 1
    pause_s: float = 0.0  # single mode: wait between a runner's calls
    baseline: str = "trivial"
    target: Target | None = None


def workloads(scale: float) -> list[Workload]:
    """Issue 3's workloads; ``scale`` shrinks the counts for a quick look."""

    def n(count: int) -> int:
        return max(1, int(count * scale))

    return [
        # Idle: each call finds the service idle (20 ms after the previous answer, the slot's
        # clean-up and next standby are done). Back to back, a call overlaps that clean-up.
        Workload("idle single", TRIVIAL, n(200), "single", 1, pause_s=IDLE_PAUSE_S,
                 target=Target("p50 < 10 ms", p50_ms=10.0)),
        Workload("singles back to back", TRIVIAL, n(200), "single", 1),
        Workload("singles c=64", TRIVIAL, n(2000), "single", 64),
        Workload("batch", TRIVIAL, n(2000), "batch",
                 target=Target(">= 3x baseline", "trivial", 3.0)),
        Workload("numpy batch", NUMPY, n(2000), "batch", baseline="numpy",
                 target=Target(">= 25x baseline", "numpy", 25.0)),
        Workload("sleep 0.1 s batch", SLEEP, n(500), "batch", baseline="sleep",
                 target=Target(">= 20x baseline", "sleep", 20.0)),
        Workload("singles c=1000", TRIVIAL, n(2000), "single", 1000,
                 target=Target("no errors")),
        Workload("batch of 45,000", TRIVIAL, n(45_000), "batch",
                 target=Target("no errors")),
    ]  # fmt: skip


def baseline_plan(scale: float) -> dict[str, tuple[str, int]]:
    """Baseline name -> (code, calls); small counts, since a fresh interpreter is slow."""
    return {"trivial": (TRIVIAL, max(20, int(300 * scale))),
            "numpy": (NUMPY, max(10, int(60 * scale))),
            "sleep": (SLEEP, max(10, int(40 * scale)))}  # fmt: skip


def plan(scale: float) -> list[str | Workload]:
    """The order of measurements: every workload, and half a baseline (named) on each side of
    the workload whose target it decides."""
    steps: list[str | Workload] = []
    for w in workloads(scale):
        judged_by = w.target.baseline if w.target else None
        steps += [judged_by, w, judged_by] if judged_by else [w]
    unused = [name for name in baseline_plan(scale) if name not in steps]
    return steps + unused * 2


def find_gateway_pid(url: str) -> int | None:
    """The local process running ``codepool gateway`` on the URL's port, if there is one."""
    port = str(urlparse(url).port or 80)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [w.decode(errors="replace") for w in argv]
        if "gateway" in words and any("codepool" in w for w in words) and port in words:
            return int(entry.name)
    return None


def memory_mib(pid: int) -> tuple[float, float]:
    """(peak RSS, current RSS) of ``pid`` in MiB, from /proc."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return (int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024)


Work = Callable[[load.Advance], Awaitable[Measurement]]


async def measure(progress: Progress, label: str, calls: int, work: Work) -> Measurement:
    """Runs ``work`` with a progress bar of its own."""
    task = progress.add_task(label, total=calls)
    result = await work(lambda count: progress.advance(task, count))
    progress.update(task, description=f"{label}: {result.calls_per_s:.0f}/s")
    return result


def run_workload(client: httpx.AsyncClient, api: str, w: Workload, token: str | None) -> Work:
    """The coroutine factory that sends workload ``w`` through ``api``."""
    label = w.name
    if api == "codejudge":
        chunk, concurrency = (1, w.concurrency) if w.mode == "single" else (256, 8)
        return lambda adv: load.codejudge(client, label, w.code, w.calls, chunk, concurrency, adv)
    if w.mode == "single":
        url = str(client.base_url)
        return lambda adv: load.singles(url, token, label, w.code, w.calls, w.concurrency, adv,
                                        w.pause_s)  # fmt: skip
    return lambda adv: load.batch(client, label, w.code, w.calls, adv)


def baseline_work(python: str, name: str, code: str, calls: int) -> Work:
    """The baseline measurement of one snippet."""
    return lambda adv: load.fresh_interpreters(python, name, code, calls, BASELINE_RUNNERS, adv)


def table(rows: list[tuple[Workload, Measurement]], baselines: dict[str, Measurement]) -> Table:
    """One row per measurement, with its ratio to the matching baseline and its target."""
    out = Table(title="codepool bench http")
    for column in ("workload", "calls", "calls/s", "p50 ms", "p90 ms", "p99 ms", "errors",
                   "x baseline", "target"):  # fmt: skip
        out.add_column(column, justify="right")
    for name, measured in baselines.items():
        out.add_row(f"baseline {name} (2 x python3 -c, before + after)", *_figures(measured),
                    "1.0x", "")  # fmt: skip
    for w, measured in rows:
        ratio = measured.calls_per_s / baselines[w.baseline].calls_per_s
        verdict = w.target.verdict(measured, baselines) if w.target else ""
        out.add_row(w.name, *_figures(measured), f"{ratio:.1f}x", verdict)
    return out


def _figures(m: Measurement) -> list[str]:
    return [str(m.calls), f"{m.calls_per_s:.1f}", f"{m.percentile_ms(50):.1f}",
            f"{m.percentile_ms(90):.1f}", f"{m.percentile_ms(99):.1f}", str(m.errors)]  # fmt: skip


async def run(url: str, api: str, python: str, scale: float, token: str | None,
              gateway_pid: int | None) -> None:  # fmt: skip
    """Measures every workload against ``url`` and its baselines (``plan``); prints one table."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    limits = httpx.Limits(max_connections=1100, max_keepalive_connections=1100)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    baselines: dict[str, Measurement] = {}
    rows: list[tuple[Workload, Measurement]] = []
    async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(900.0, connect=30.0),
                                 limits=limits, headers=headers) as client:  # fmt: skip
        with Progress(*columns, console=console) as progress:
            snippets = baseline_plan(scale)
            for step in plan(scale):
                if isinstance(step, Workload):
                    work = run_workload(client, api, step, token)
                    rows.append((step, await measure(progress, step.name, step.calls, work)))
                    continue
                code, calls = snippets[step]
                half = await measure(progress, f"baseline {step}", calls // 2,
                                     baseline_work(python, step, code, calls // 2))  # fmt: skip
                baselines[step] = baselines[step].pooled(half) if step in baselines else half
    console.print(table(rows, baselines))
    pid = gateway_pid or find_gateway_pid(url)
    if pid is None:
        console.print("gateway peak memory: not measured (no local gateway process found)")
    else:
        peak, now = memory_mib(pid)
        console.print(f"gateway (pid {pid}) peak RSS {peak:.0f} MiB, now {now:.0f} MiB")


def run_sync(url: str, api: str, python: str, scale: float, token: str | None,
             gateway_pid: int | None) -> None:  # fmt: skip
    """Entry point for the CLI."""
    asyncio.run(run(url, api, python, scale, token, gateway_pid))
