"""The ``codepool`` command. It only parses flags; the work lives in the packages."""

import asyncio
from pathlib import Path
from typing import Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from codepool import bench, logs

app = typer.Typer(help="Sandboxed code execution for agentic RL.", no_args_is_help=True)
app.add_typer(bench.app, name="bench")

SettingsT = TypeVar("SettingsT", bound=BaseModel)


def _settings[SettingsT: BaseModel](cls: type[SettingsT], **flags: Any) -> SettingsT:
    """Settings from the environment, with the flags that were given on top; fails fast."""
    try:
        return cls(**{name: value for name, value in flags.items() if value is not None})
    except ValidationError as exc:
        typer.echo(f"invalid configuration ({cls.__name__}):\n{exc}", err=True)
        raise typer.Exit(2) from None


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Gateway address."),
    port: int = typer.Option(8000, help="Gateway port."),
    workers: int = typer.Option(2, min=1, help="Worker processes."),
    slots: int = typer.Option(32, min=1, help="Sandbox slots per worker (size by memory)."),
    redis_url: str | None = typer.Option(None, help="Use this Redis instead of starting one."),
    run_dir: str | None = typer.Option(None, help="Where Redis's socket goes (default: temp)."),
    uid_base: int = typer.Option(200_000, help="First outside uid of the sandboxes."),
    worker_metrics_port: int = typer.Option(9100, help="Worker i serves metrics on this + i."),
    drain_timeout_s: float = typer.Option(30.0, help="How long workers may finish on stop."),
    ready_timeout_s: float = typer.Option(300.0, help="Start-up time allowed."),
    log_level: str = typer.Option("info"),
) -> None:
    """Run Redis, workers and the gateway on this machine; Ctrl-C stops everything."""
    from codepool.serve import ServeOptions
    from codepool.serve import serve as run_serve

    logs.configure(log_level)
    options = ServeOptions(host, port, workers, slots, redis_url,
                           Path(run_dir) if run_dir else None, uid_base,
                           worker_metrics_port, drain_timeout_s, ready_timeout_s)  # fmt: skip
    raise typer.Exit(run_serve(options))


@app.command()
def gateway(
    host: str = typer.Option("0.0.0.0", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    redis_url: str | None = typer.Option(None, help="Overrides CODEPOOL_REDIS_URL."),
    log_level: str = typer.Option("info"),
) -> None:
    """Run the HTTP gateway (one process; configured by CODEPOOL_* variables)."""
    from gateway.server import run
    from gateway.settings import GatewaySettings

    logs.configure(log_level)
    run(_settings(GatewaySettings, redis_url=redis_url), host, port, log_level)


@app.command()
def worker(
    redis_url: str | None = typer.Option(None, help="Overrides CODEPOOL_REDIS_URL."),
    worker_id: str | None = typer.Option(None, help="Consumer name (default: hostname)."),
    slots: int | None = typer.Option(None, help="Overrides CODEPOOL_SANDBOX_SLOTS."),
    metrics_port: int | None = typer.Option(None, help="Prometheus port (default 9100; 0 = off)."),
    check: bool = typer.Option(
        False, "--check", help="Exit 0 if this worker's heartbeat is fresh."
    ),
    log_level: str = typer.Option("info"),
) -> None:
    """Run one sandbox worker process (drains in-flight jobs on SIGTERM)."""
    import uvloop

    from executor.nsjail import SandboxUnavailable
    from executor.settings import SandboxSettings
    from executor.worker import check as check_alive
    from executor.worker import serve as serve_worker
    from executor.worker_settings import WorkerSettings

    logs.configure(log_level)
    settings = _settings(WorkerSettings, redis_url=redis_url, worker_id=worker_id,
                         metrics_port=metrics_port)  # fmt: skip
    if check:
        raise typer.Exit(0 if asyncio.run(check_alive(settings)) else 1)
    sandbox = _settings(SandboxSettings, slots=slots)
    try:
        # uvloop: the worker's pipes to its jails and its Redis traffic cost less CPU per job.
        asyncio.run(serve_worker(settings, sandbox), loop_factory=uvloop.new_event_loop)
    except SandboxUnavailable as exc:
        typer.echo(f"the sandbox cannot run on this host: {exc}", err=True)
        raise typer.Exit(3) from None


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def train(ctx: typer.Context) -> None:
    """Train a policy with GRPO-RoC against a running codepool (--help lists every flag).

    ``--engine verl`` trains on a Ray cluster instead (``--engine verl --help``: its flags).
    """
    engine, args = split_engine(list(ctx.args))
    if engine == "verl":
        from trainer.verl.launch import main as train_on_verl

        raise typer.Exit(train_on_verl(args))
    if engine != "local":
        typer.echo(f"unknown --engine {engine!r}: local or verl", err=True)
        raise typer.Exit(2)
    from trainer.local.cli_args import parse_config
    from trainer.local.train import train as run_training

    run_dir = run_training(parse_config(args))
    typer.echo(f"run folder: {run_dir}")


def split_engine(args: list[str]) -> tuple[str, list[str]]:
    """``--engine NAME`` (or ``--engine=NAME``) taken out of ``args``; ``local`` when absent."""
    engine = "local"
    rest: list[str] = []
    values = iter(args)
    for arg in values:
        if arg == "--engine":
            engine = next(values, "")
        elif arg.startswith("--engine="):
            engine = arg.partition("=")[2]
        else:
            rest.append(arg)
    return engine, rest
