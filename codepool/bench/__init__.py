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
def http(
    url: str = typer.Option("http://127.0.0.1:8000", help="The service to drive (loopback)."),
    api: str = typer.Option("native", help="native, or codejudge for a code-judge peer."),
    python: str = typer.Option("/opt/codepool/sandbox/bin/python3", help="Baseline interpreter."),
    scale: float = typer.Option(1.0, help="Multiply every call count (0.1 for a quick look)."),
    token: str | None = typer.Option(None, envvar="CODEPOOL_AUTH_TOKEN", help="Bearer token."),
    gateway_pid: int | None = typer.Option(None, help="Gateway pid for peak memory."),
) -> None:
    """Throughput and latency over HTTP vs 2 runners of a fresh ``python3 -c`` per call."""
    from codepool.bench.http import run_sync

    if api not in ("native", "codejudge"):
        raise typer.BadParameter("api must be native or codejudge")
    run_sync(url, api, python, scale, token, gateway_pid)


@app.command()
def sessions(
    url: str = typer.Option("http://127.0.0.1:8000", help="The service to drive (loopback)."),
    trajectories: int = typer.Option(8, help="Concurrent 10-cell trajectories per approach."),
    token: str | None = typer.Option(None, envvar="CODEPOOL_AUTH_TOKEN", help="Bearer token."),
) -> None:
    """A 10-cell trajectory through sessions vs replaying all earlier cells per call."""
    from codepool.bench.sessions import run

    asyncio.run(run(url, token, trajectories))


@app.command()
def train(
    url: str | None = typer.Option(None, help="A running codepool; default: start one."),
    steps: int = typer.Option(4, help="Measured steps per variant (after one warm-up step)."),
    slots: int = typer.Option(8, help="Sandbox slots of the service started when no --url."),
) -> None:
    """Toy training steps: rollout throughput and the time split generate/service/update."""
    from codepool.bench.train import main

    main(url, steps, slots)
