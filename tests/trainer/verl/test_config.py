"""The recipes compose on verl's defaults, pass verl's validation, say the report's numbers."""

import json
from pathlib import Path
from typing import Any

import pytest

from trainer.verl import launch
from trainer.verl.compose import RECIPES

STAGES = {  # recipe: (response tokens, max turns, last step)
    "rstar2_stage1": (8192, 10, 300),
    "rstar2_stage2": (12288, 10, 385),
    "rstar2_stage3": (12288, 15, 125),
}


@pytest.fixture(scope="module")
def recipes(compose: Any, model_dir: Path) -> dict[str, Any]:
    return {name: compose(name, [f"actor_rollout_ref.model.path={model_dir}"]) for name in RECIPES}


@pytest.mark.parametrize("name", RECIPES)
def test_recipe_passes_verl_validation(recipes: dict[str, Any], name: str) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    config = recipes[name]
    validate_config(config, need_reference_policy(config), need_critic(config))
    rollout = config.actor_rollout_ref.rollout
    # One PPO mini-batch holds every row RoC keeps: one optimizer step per rollout step.
    kept_rows = config.data.train_batch_size * config.codepool.group_size
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size * rollout.n == kept_rows


@pytest.mark.parametrize("name", list(STAGES))
def test_report_recipe(recipes: dict[str, Any], name: str) -> None:
    config = recipes[name]
    actor, rollout = config.actor_rollout_ref.actor, config.actor_rollout_ref.rollout
    response_tokens, turns, last_step = STAGES[name]
    assert (rollout.n, config.codepool.group_size, config.codepool.roc_mode) == (32, 16, "paper")
    assert config.data.train_batch_size == 512
    assert (actor.optim.lr, actor.optim.lr_warmup_steps) == (1e-6, 20)
    assert actor.optim.lr_scheduler_type == "constant"
    assert (rollout.response_length, rollout.multi_turn.max_assistant_turns) == (
        response_tokens,
        turns,
    )
    assert (rollout.temperature, rollout.top_p) == (1.0, 1.0)
    assert config.trainer.total_training_steps == last_step
    assert config.trainer.nnodes * config.trainer.n_gpus_per_node == 64


def test_stages_one_and_two_share_checkpoints_and_stage_three_starts_fresh(
    recipes: dict[str, Any],
) -> None:
    one, two, three = (recipes[f"rstar2_stage{i}"].trainer for i in (1, 2, 3))
    assert one.default_local_dir == two.default_local_dir != three.default_local_dir
    assert two.resume_mode == "auto" and three.resume_mode == "disable"


def test_single_node_recipe(recipes: dict[str, Any]) -> None:
    config = recipes["single_node"]
    assert (config.trainer.nnodes, config.trainer.n_gpus_per_node) == (1, 8)
    assert (config.actor_rollout_ref.rollout.n, config.codepool.group_size) == (16, 8)


@pytest.mark.parametrize(
    "override",
    [
        "actor_rollout_ref.rollout.n=16",  # G=16 with RoC needs 2G
        "trainer.use_v1=true",
        "trainer.balance_batch=false",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        "algorithm.adv_estimator=gae",
    ],
)
def test_configs_roc_cannot_run_are_refused(compose: Any, model_dir: Path, override: str) -> None:
    with pytest.raises(ValueError, match="invalid GRPO-RoC config"):
        compose("rstar2_stage1", [f"actor_rollout_ref.model.path={model_dir}", override])


def test_plain_grpo_samples_g(compose: Any, model_dir: Path) -> None:
    config = compose(
        "single_node",
        [f"actor_rollout_ref.model.path={model_dir}", "codepool.roc_mode=none",
         "actor_rollout_ref.rollout.n=8"],
    )  # fmt: skip
    assert config.actor_rollout_ref.rollout.n == config.codepool.group_size


def test_launch_dry_run_converts_jsonl_for_verls_dataset(
    tmp_path: Path, model_dir: Path, capsys: pytest.CaptureFixture[str], compose: Any
) -> None:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    data = tmp_path / "train.jsonl"
    data.write_text(
        "\n".join(json.dumps({"prompt": f"Q{i}: 6*7 =", "answer": "42"}) for i in range(3))
    )
    run_dir = tmp_path / "run"
    argv = ["--config", "rstar2_stage1", "--model", str(model_dir), "--service-url",
            "http://codepool:8000", "--train-data", str(data), "--output-dir", str(run_dir),
            "--dry-run", "trainer.total_training_steps=7"]  # fmt: skip
    assert launch.main(argv) == 0
    printed = OmegaConf.create(capsys.readouterr().out)
    assert printed.codepool.service_url == "http://codepool:8000"
    assert printed.trainer.total_training_steps == 7
    assert printed.trainer.default_local_dir == str((tmp_path / "run" / "checkpoints").resolve())
    parquet = tmp_path / "run" / "data" / "train.parquet"
    assert printed.data.train_files == str(parquet.resolve())
    dataset = RLHFDataset(str(parquet), AutoTokenizer.from_pretrained(model_dir), printed.data)
    item = dataset[2]
    assert item["raw_prompt"] == [{"role": "user", "content": "Q2: 6*7 ="}]
    assert item["reward_model"]["ground_truth"] == "42"
    assert item["agent_name"] == "codepool_agent"


def test_codepool_train_engine_verl(model_dir: Path) -> None:
    from typer.testing import CliRunner

    from codepool.cli import app

    runner = CliRunner()
    argv = ["train", "--engine", "verl", "--model", str(model_dir), "--dry-run"]
    result = runner.invoke(app, argv)
    assert result.exit_code == 0, result.output
    assert "default_agent_loop: codepool_agent" in result.output
    assert runner.invoke(app, ["train", "--engine=tpu"]).exit_code == 2
