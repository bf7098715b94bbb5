"""Flags generated from :class:`TrainConfig`: one flag per field, its docstring as the help.

Values start from ``--preset`` (or the dataclass defaults); only flags given override them.
"""

import argparse
import ast
import inspect
import itertools
import textwrap
import typing
from collections.abc import Sequence
from dataclasses import fields, replace
from typing import Any

from trainer.local.config import PRESETS, TrainConfig, parse_stages


def field_docs(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string literal right under a field) of a dataclass."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else []
    docs: dict[str, str] = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = following.value.value.strip()
    return docs


def _flag_options(annotation: Any) -> dict[str, Any]:
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if typing.get_origin(annotation) is typing.Literal:
        return {"choices": list(typing.get_args(annotation))}
    if annotation in (int, float, str):
        return {"type": annotation}
    return {"type": parse_stages, "metavar": "NAME|FILE"}


def build_parser(prog: str = "codepool train") -> argparse.ArgumentParser:
    """The parser of ``codepool train``."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description=TrainConfig.__doc__,
    )
    parser.add_argument(
        "--preset", choices=sorted(PRESETS), help="Start from these settings, then apply flags."
    )
    hints = typing.get_type_hints(TrainConfig)
    docs = field_docs(TrainConfig)
    defaults = TrainConfig()
    for spec in fields(TrainConfig):
        parser.add_argument(
            "--" + spec.name.replace("_", "-"),
            dest=spec.name,
            default=argparse.SUPPRESS,
            help=f"{docs.get(spec.name, '')} (default: {getattr(defaults, spec.name)!r})",
            **_flag_options(hints[spec.name]),
        )
    return parser


def parse_config(argv: Sequence[str]) -> TrainConfig:
    """The run's configuration from command-line arguments."""
    arguments = vars(build_parser().parse_args(list(argv)))
    preset = arguments.pop("preset", None)
    base = PRESETS[preset] if preset else TrainConfig()
    return replace(base, **arguments)
