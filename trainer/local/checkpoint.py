"""Checkpoints: model and tokenizer (``save_pretrained``) plus optimizer and schedule state.

A checkpoint is written to a temporary folder and renamed into place, so a crash never leaves
a half-written one that resume would pick. Randomness is re-seeded from (seed, step) at every
step, so no generator state needs saving.
"""

import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

STATE_FILE = "trainer_state.pt"
_STEP_DIR = re.compile(r"step_(\d+)")


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    """Where the checkpoint taken after ``step`` completed steps lives."""
    return run_dir / "checkpoints" / f"step_{step:06d}"


def save_checkpoint(
    run_dir: Path,
    step: int,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    state: dict[str, Any],
    keep: int,
) -> Path:
    """Saves after ``step`` completed steps; keeps the newest ``keep`` checkpoints."""
    final = checkpoint_dir(run_dir, step)
    partial = final.with_name(final.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    torch.save({"step": step, **state}, partial / STATE_FILE)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(partial, final)
    for old in list_checkpoints(run_dir)[:-keep] if keep > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete checkpoints of a run, oldest first."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return []
    found = [
        path
        for path in folder.iterdir()
        if _STEP_DIR.fullmatch(path.name) and (path / STATE_FILE).is_file()
    ]
    return sorted(found, key=lambda path: int(path.name.split("_")[1]))


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint, if any."""
    checkpoints = list_checkpoints(run_dir)
    return checkpoints[-1] if checkpoints else None


def load_state(checkpoint: Path) -> dict[str, Any]:
    """The trainer state saved with a checkpoint (``step``, optimizer, schedule)."""
    state: dict[str, Any] = torch.load(checkpoint / STATE_FILE, weights_only=True)
    return state
