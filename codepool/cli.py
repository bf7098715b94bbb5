"""The ``codepool`` command. It only parses flags; the work lives in the packages."""

import typer

from codepool import bench

app = typer.Typer(help="Sandboxed code execution for agentic RL.", no_args_is_help=True)
app.add_typer(bench.app, name="bench")


def _not_built(issue: int) -> None:
    typer.echo(f"not built yet: this subcommand lands with issue {issue}", err=True)
    raise typer.Exit(2)


@app.command()
def serve() -> None:
    """Run Redis, workers and the gateway on this machine."""
    _not_built(3)


@app.command()
def gateway() -> None:
    """Run the HTTP gateway (one process)."""
    _not_built(3)


@app.command()
def worker() -> None:
    """Run one sandbox worker process."""
    _not_built(3)


@app.command(
    context_settings={
        "allow_extra_args": True,
        "ignore_unknown_options": True,
        "help_option_names": [],
    },
    add_help_option=False,
)
def train(ctx: typer.Context) -> None:
    """Train a policy with GRPO-RoC against a running codepool (--help lists every flag)."""
    from trainer.local.cli_args import parse_config
    from trainer.local.train import train as run_training

    run_dir = run_training(parse_config(ctx.args))
    typer.echo(f"run folder: {run_dir}")
