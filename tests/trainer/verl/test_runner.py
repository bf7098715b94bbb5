"""verl's own TaskRunner, as we start it, builds the RoC trainer (up to where GPUs are needed)."""

import json
from pathlib import Path
from typing import Any

import pytest

from trainer.verl import launch
from trainer.verl.ray_trainer import RocRayPPOTrainer
from trainer.verl.runner import roc_task_runner


class StopBeforeGpus(Exception):
    """Raised where verl would start its Ray GPU workers."""


def test_task_runner_builds_the_roc_trainer(
    tmp_path: Path, model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trainer.verl.compose import compose_config

    data = tmp_path / "train.jsonl"
    data.write_text("\n".join(json.dumps({"prompt": f"Q{i}", "answer": str(i)}) for i in range(8)))
    args = launch.build_parser().parse_args(
        ["--model", str(model_dir), "--train-data", str(data), "--output-dir", str(tmp_path)]
    )
    overrides = ["data.train_batch_size=4", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
                 "trainer.n_gpus_per_node=1", "data.dataloader_num_workers=0"]  # fmt: skip
    config = compose_config("single_node", [*launch.flag_overrides(args), *overrides])
    built: list[Any] = []

    def stop(trainer: RocRayPPOTrainer) -> None:
        built.append(trainer)
        raise StopBeforeGpus

    from verl.trainer import main_ppo_v0

    monkeypatch.setattr(RocRayPPOTrainer, "init_workers", stop)
    # run() points verl's module at our trainer; give the name back after the test.
    monkeypatch.setattr(main_ppo_v0, "RayPPOTrainer", main_ppo_v0.RayPPOTrainer)
    runner_class = roc_task_runner().__ray_actor_class__  # the class, run in this process
    with pytest.raises(StopBeforeGpus):
        runner_class().run(config)
    (trainer,) = built
    assert type(trainer) is RocRayPPOTrainer
    assert trainer.codepool.group_size == 8 and trainer.codepool.roc_mode == "paper"
    assert len(trainer.train_dataloader) == 2  # 8 prompts, 4 per step
