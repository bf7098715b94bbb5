"""The run configuration: flags from field docstrings, presets, stages."""

import json
from dataclasses import fields
from pathlib import Path

import pytest

from trainer.local.cli_args import build_parser, field_docs, parse_config
from trainer.local.config import RSTAR2_STAGES, Stage, TrainConfig, with_plain_grpo


def test_every_field_documents_itself_in_help() -> None:
    docs = field_docs(TrainConfig)
    assert set(docs) == {f.name for f in fields(TrainConfig)}
    help_text = " ".join(build_parser().format_help().split())
    assert "Rollouts sampled per prompt (2G for RoC; G for plain GRPO)." in help_text


def test_flags_override_the_preset_and_only_given_flags_do() -> None:
    config = parse_config(["--preset", "rstar2", "--seed", "7", "--no-resume", "--roc", "public"])
    assert (config.seed, config.resume, config.roc) == (7, False, "public")
    assert (config.group_size, config.rollouts_per_prompt, config.prompts_per_step) == (16, 32, 512)
    assert (config.learning_rate, config.warmup_steps, config.temperature) == (1e-6, 20, 1.0)
    assert (config.clip_eps_low, config.clip_eps_high) == (0.2, 0.28)


def test_the_report_recipe_stages() -> None:
    stages = parse_config(["--stages", "rstar2"]).resolved_stages()
    assert stages == RSTAR2_STAGES
    assert [s.max_response_tokens for s in stages] == [8192, 12288, 12288]
    assert [s.max_turns for s in stages] == [10, 10, 15]
    assert [s.steps for s in stages] == [300, 85, 125]
    assert [s.reset_optimizer for s in stages] == [False, False, True]


def test_stages_from_a_json_file(tmp_path: Path) -> None:
    path = tmp_path / "stages.json"
    path.write_text(json.dumps([{"name": "a", "steps": 2, "max_response_tokens": 64,
                                 "max_turns": 2, "dataset": "hard.jsonl"}]))  # fmt: skip
    stages = parse_config(["--stages", str(path)]).stages
    assert stages == (Stage("a", 2, 64, 2, "hard.jsonl"),)


def test_without_stages_one_stage_comes_from_the_flat_fields() -> None:
    config = TrainConfig(steps=5, max_turns=2, max_response_tokens=99)
    assert config.resolved_stages() == (Stage("main", 5, 99, 2),)


def test_validation() -> None:
    with pytest.raises(ValueError, match="required"):
        TrainConfig().validate()
    base = TrainConfig(model="m", dataset="d")
    with pytest.raises(ValueError, match="at least group_size"):
        TrainConfig(model="m", dataset="d", rollouts_per_prompt=4).validate()
    plain = with_plain_grpo(base)
    assert (plain.roc, plain.rollouts_per_prompt) == ("none", base.group_size)
    assert plain.validate() is plain
