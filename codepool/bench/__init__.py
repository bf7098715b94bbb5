"""``codepool bench``: commands that print measured figures, each against a same-run baseline."""

import asyncio

import typer

app = typer.Typer(
    help="Benchmarks: print figures and ratios against baselines.", no_args_is_help=True
)


@app.command()
def sandbox(
    slots: int = typer.Option(4, help="N for the N-slot measurement."),
    calls: int = typer.Option(400, help="Calls per warm-slot measurement."),
    baseline_calls: int = typer.Option(40, help="Calls per baseline measurement (they are slow)."),
) -> None:
    """Warm slots vs a fresh ``python3 -c`` and a fresh nsjail per call."""
    from codepool.bench.sandbox import run

    asyncio.run(run(slots=slots, calls=calls, baseline_calls=baseline_calls))


@app.command()
def train(
    url: str | None = typer.Option(None, help="A running codepool; default: start one."),
    steps: int = typer.Option(4, help="Measured steps per variant (after one warm-up step)."),
    slots: int = typer.Option(8, help="Sandbox slots of the service started when no --url."),
) -> None:
    """Toy training steps: rollout throughput and the time split generate/service/update."""
    from codepool.bench.train import main

    main(url, steps, slots)
