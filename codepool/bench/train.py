"""``codepool bench train``: rollout throughput and where a training step's time goes (toy setup).

Runs a few steps of the toy run against a real service, twice: with the client's
micro-batching (the default) and, as the same-run baseline, one call per HTTP request. The
first step of each is a warm-up and is left out of the figures.
"""

import asyncio
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from codepool.bench.local_service import running_service
from trainer.local.config import PRESETS
from trainer.local.logbook import read_metrics
from trainer.local.train import run_training

console = Console(width=150)
SHARE_KEYS = {
    "generate": "time/generate_s",
    "service wait": "time/service_wait_s",
    "rollout other": "time/rollout_other_s",
    "reward": "time/reward_s",
    "update": "time/update_s",
}


@dataclass(frozen=True)
class TrainFigures:
    """Means over the measured steps of one variant."""

    label: str
    steps: int
    step_s: float
    trajectories_per_s: float
    tool_calls_per_s: float
    shares: dict[str, float]
    service_latency_s: float


def summarise(label: str, metrics: Sequence[dict[str, float]]) -> TrainFigures:
    """Figures over ``metrics`` (the warm-up step already removed)."""
    total_s = sum(m["time/step_s"] for m in metrics)
    rollout_s = sum(m["time/step_s"] - m["time/reward_s"] - m["time/update_s"] for m in metrics)
    trajectories = sum(m["rollout/count"] for m in metrics)
    calls = sum(m["tool/calls_per_rollout"] * m["rollout/count"] for m in metrics)
    shares = {name: sum(m[key] for m in metrics) / total_s for name, key in SHARE_KEYS.items()}
    latency_s = sum(m["tool/latency_s_mean"] for m in metrics) / len(metrics)
    return TrainFigures(label, len(metrics), total_s / len(metrics), trajectories / rollout_s,
                        calls / rollout_s, shares, latency_s)  # fmt: skip


async def _measure(url: str, steps: int, batched: bool, out_dir: Path) -> TrainFigures:
    config = replace(
        PRESETS["toy"],
        service_url=url,
        steps=steps + 1,
        output_dir=str(out_dir),
        run_name="batched" if batched else "unbatched",
        progress=False,
        resume=False,
        client_max_batch_items=256 if batched else 1,
        client_max_in_flight=8 if batched else 64,
    )
    run_dir = await run_training(config)
    label = "batched" if batched else "1 call/request"
    return summarise(label, read_metrics(run_dir / "metrics.jsonl")[1:])


def _table(figures: list[TrainFigures]) -> Table:
    table = Table(title="codepool bench train (toy: 16 prompts x 16 rollouts, RoC)")
    for column in ("client", "step s", "traj/s", "calls/s", "call ms",
                   *[f"{name} %" for name in SHARE_KEYS]):  # fmt: skip
        table.add_column(column, justify="right", no_wrap=True)
    for f in figures:
        table.add_row(f.label, f"{f.step_s:.2f}", f"{f.trajectories_per_s:.1f}",
                      f"{f.tool_calls_per_s:.1f}", f"{f.service_latency_s * 1000:.0f}",
                      *[f"{100 * f.shares[name]:.0f}" for name in SHARE_KEYS])  # fmt: skip
    return table


async def run(url: str | None, steps: int, slots: int) -> list[TrainFigures]:
    """Measures both variants against ``url``, or against a ``codepool serve`` it starts."""
    with tempfile.TemporaryDirectory(prefix="codepool-bench-train-") as tmp:
        out_dir = Path(tmp)
        if url is None:
            with running_service(out_dir / "serve.log", slots=slots) as started_url:
                figures = [await _measure(started_url, steps, b, out_dir) for b in (True, False)]
        else:
            figures = [await _measure(url, steps, b, out_dir) for b in (True, False)]
    console.print(_table(figures))
    batched, single = figures
    console.print(
        f"service wait share {100 * batched.shares['service wait']:.0f}% batched vs "
        f"{100 * single.shares['service wait']:.0f}% with one call per request; "
        f"tool calls/s x{batched.tool_calls_per_s / max(single.tool_calls_per_s, 1e-9):.2f}"
    )
    return figures


def main(url: str | None, steps: int, slots: int) -> None:
    """Entry point of the CLI command."""
    asyncio.run(run(url, steps, slots))
