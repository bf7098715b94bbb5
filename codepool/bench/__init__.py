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
