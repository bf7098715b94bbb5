"""Checkpoints: atomic save, pruning, resume state."""

from pathlib import Path

import torch

from trainer.local.checkpoint import (
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
    load_state,
    save_checkpoint,
)
from trainer.toy.model import build_model
from trainer.toy.tokenizer import build_tokenizer


def test_save_prune_and_load(tmp_path: Path) -> None:
    model, tokenizer = build_model(seed=0), build_tokenizer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for step in (10, 20, 30):
        state = {"optimizer": optimizer.state_dict(), "schedule": {"last_epoch": step}}
        save_checkpoint(tmp_path, step, model, tokenizer, state, keep=2)
    (tmp_path / "checkpoints" / "step_000040.partial").mkdir()  # a crash mid-save

    assert list_checkpoints(tmp_path) == [
        checkpoint_dir(tmp_path, 20),
        checkpoint_dir(tmp_path, 30),
    ]
    latest = latest_checkpoint(tmp_path)
    assert latest == checkpoint_dir(tmp_path, 30)
    state = load_state(latest)
    assert state["step"] == 30 and state["schedule"] == {"last_epoch": 30}
    assert (latest / "config.json").is_file() and (latest / "tokenizer.json").is_file()


def test_no_checkpoint_yet(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path) is None
