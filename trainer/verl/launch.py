"""``codepool train --engine verl``: compose a recipe, point it at codepool and data, run it.

Flags name what a codepool user sets; anything else is a hydra override (``key=value``) of
verl's config, applied last.
"""

import argparse
from collections.abc import Sequence
from pathlib import Path

from trainer.verl.compose import RECIPES, compose_config
from trainer.verl.data import jsonl_to_parquet

DEFAULT_OUTPUT_DIR = Path("runs/verl")


def build_parser(prog: str = "codepool train --engine verl") -> argparse.ArgumentParser:
    """The parser of the verl engine's flags."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="GRPO-RoC on verl: compose a recipe, point it at codepool and data, run it on"
        " the Ray cluster (RAY_ADDRESS) or a local Ray. Arguments after the flags are hydra"
        " overrides of verl's config (key=value), applied last.",
    )
    parser.add_argument(
        "--config",
        default="single_node",
        help=f"A recipe ({', '.join(RECIPES)}) or a YAML file building on them.",
    )
    parser.add_argument("--model", help="Hugging Face model directory or hub id to start from.")
    parser.add_argument("--service-url", help="codepool's URL, reachable from every node.")
    parser.add_argument("--train-data", type=Path, help="JSONL (prompt, answer) or verl parquet.")
    parser.add_argument("--val-data", type=Path, help="Validation data, same formats.")
    parser.add_argument("--system-prompt-file", type=Path, help="System turn for JSONL data.")
    parser.add_argument(
        "--output-dir",
        type=Path,
        help="Checkpoints go to OUTPUT_DIR/checkpoints (default: the recipe's); converted data to"
        " OUTPUT_DIR/data (default: runs/verl/data).",
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="Print the composed config and exit."
    )
    parser.add_argument("overrides", nargs="*", help="hydra overrides of verl's config: key=value")
    return parser


def dataset_file(path: Path, output_dir: Path, name: str, system_prompt: str) -> Path:
    """A parquet file verl can read: ``path`` itself, or its conversion from JSONL."""
    if path.suffix == ".parquet":
        return path.resolve()
    target = (output_dir / "data" / f"{name}.parquet").resolve()
    jsonl_to_parquet(path, target, system_prompt)
    return target


def flag_overrides(args: argparse.Namespace) -> list[str]:
    """The hydra overrides the flags stand for."""
    system_prompt = args.system_prompt_file.read_text() if args.system_prompt_file else ""
    overrides = []
    if args.output_dir:
        overrides.append(f"trainer.default_local_dir={(args.output_dir / 'checkpoints').resolve()}")
    data_dir = args.output_dir or DEFAULT_OUTPUT_DIR
    if args.model:
        overrides.append(f"actor_rollout_ref.model.path={args.model}")
    if args.service_url:
        overrides.append(f"codepool.service_url={args.service_url}")
    if args.train_data:
        train = dataset_file(args.train_data, data_dir, "train", system_prompt)
        overrides.append(f"data.train_files={train}")
        if not args.val_data:
            overrides.append(f"data.val_files={train}")
    if args.val_data:
        overrides.append(
            f"data.val_files={dataset_file(args.val_data, data_dir, 'val', system_prompt)}"
        )
    return overrides


def main(argv: Sequence[str]) -> int:
    """Runs (or with ``--dry-run`` prints) the training the arguments describe."""
    from omegaconf import OmegaConf

    args = build_parser().parse_args(list(argv))
    config = compose_config(args.config, [*flag_overrides(args), *args.overrides])
    if args.dry_run:
        print(OmegaConf.to_yaml(config))
        return 0
    from trainer.verl.runner import run

    run(config)
    return 0
