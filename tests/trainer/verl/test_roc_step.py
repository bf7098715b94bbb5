"""RoC on verl's batch keeps what trainer.core keeps; the trainer hook pads and balances."""

import random
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from tests.trainer.verl.conftest import make_worker, run_async
from tests.trainer.verl.rollouts import random_groups, to_batch
from trainer.core.grpo import select_rollouts
from trainer.core.roc import RocMode
from trainer.verl import fields
from trainer.verl.ray_trainer import RocRayPPOTrainer, step_rng
from trainer.verl.roc_step import keep_rows, select_batch

G = 4
GROUPS = 12


@pytest.fixture(scope="module")
def config(compose: Any, model_dir: Path) -> Any:
    return compose(
        "single_node",
        [
            f"actor_rollout_ref.model.path={model_dir}",
            f"codepool.group_size={G}",
            f"actor_rollout_ref.rollout.n={2 * G}",
            f"data.train_batch_size={GROUPS}",
            f"actor_rollout_ref.actor.ppo_mini_batch_size={GROUPS // 2}",
            "data.max_prompt_length=16",
            "data.max_response_length=64",
        ],
    )


@pytest.fixture(scope="module")
def worker(config: Any) -> Any:
    return make_worker(config)


def verl_advantages(batch: Any) -> list[float]:
    """verl's GRPO advantage of each row (constant over its model tokens), as fit computes it."""
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.trainer.ppo.reward import extract_reward

    batch.batch["token_level_rewards"] = extract_reward(batch)[0]
    batch = compute_advantage(batch, adv_estimator="grpo", norm_adv_by_std_in_grpo=True)
    advantages = batch.batch["advantages"]
    mask = batch.batch["response_mask"].bool()
    return [
        float(advantages[row][mask[row]][0]) if mask[row].any() else 0.0
        for row in range(len(batch))
    ]


@pytest.mark.parametrize("mode", ["paper", "public", "none"])
@pytest.mark.parametrize("seed", range(6))
def test_batch_selection_and_advantages_match_trainer_core(
    worker: Any, mode: RocMode, seed: int
) -> None:
    groups = random_groups(random.Random(seed), GROUPS, G if mode == "none" else 2 * G)
    flat = [rollout for group in groups for rollout in group]
    expected = select_rollouts(groups, G, mode, random.Random(100 + seed))
    batch = run_async(to_batch(worker, groups))
    selection = select_batch(batch, G, mode, random.Random(100 + seed))
    assert [flat[row] for row in selection.kept] == expected.kept
    assert selection.dropped == expected.dropped and selection.groups == expected.groups
    keep_rows(batch, selection.kept)
    assert verl_advantages(batch) == pytest.approx(
        [s.advantage for s in expected.samples], abs=1e-5
    )


def test_selection_is_not_trivial(worker: Any) -> None:
    """The cases above keep some groups, drop others and, in paper mode, drop rows."""
    groups = random_groups(random.Random(0), GROUPS, 2 * G)
    selection = select_batch(run_async(to_batch(worker, groups)), G, "paper", random.Random(1))
    assert 0 < sum(selection.dropped.values()) < GROUPS
    assert len(selection.kept) % G == 0 and 0 < len(selection.kept) < GROUPS * 2 * G


def trainer_for(config: Any, worker: Any, dp_size: int) -> Any:
    """The RoC trainer without Ray workers: its hook needs config, tokenizer and the DP size."""
    from trainer.verl.settings import settings_from_config

    trainer = RocRayPPOTrainer.__new__(RocRayPPOTrainer)
    trainer.config = config
    trainer.codepool = settings_from_config(config)
    trainer.tokenizer = worker.tokenizer
    trainer.global_steps = 7
    # What verl's worker group reports of its mesh: one rank per entry, DP rank as value.
    trainer.actor_rollout_wg = SimpleNamespace(_dispatch_info={"actor": list(range(dp_size))})
    return trainer


def test_balance_hook_runs_roc_then_pads_to_the_update_multiple(config: Any, worker: Any) -> None:
    groups = random_groups(random.Random(3), GROUPS, 2 * G)
    batch = run_async(to_batch(worker, groups))
    reference = select_batch(run_async(to_batch(worker, groups)), G, "paper", step_rng(1, 7))
    trainer = trainer_for(config, worker, dp_size=4)
    metrics: dict[str, Any] = {}
    trainer._balance_batch(batch, metrics)
    rows = GROUPS * G  # ppo_mini_batch_size x n = 6 x 8: one mini-batch of every kept row
    assert len(batch) == rows and rows % 4 == 0
    padding = batch.non_tensor_batch[fields.PADDING].astype(bool)
    assert int(padding.sum()) == rows - len(reference.kept) == metrics["roc/padding_rows"] > 0
    assert batch.batch["response_mask"][torch.from_numpy(padding)].sum() == 0
    assert batch.batch["rm_scores"][torch.from_numpy(padding)].sum() == 0
    assert not batch.non_tensor_batch[fields.REWARD][padding].any()
    assert not batch.non_tensor_batch[fields.VERL_SCORE][padding].any()
    assert batch.batch["attention_mask"][torch.from_numpy(padding)].sum(dim=-1).tolist() == [
        2
    ] * int(padding.sum())
    kept_uids = sorted(batch.non_tensor_batch["uid"][~padding].tolist())
    assert kept_uids == sorted(f"prompt-{row // (2 * G)}" for row in reference.kept)
    assert "global_seqlen/min" in metrics  # verl's own balancing ran after RoC
    assert metrics["roc/kept_rollouts"] == len(reference.kept)
    advantages = verl_advantages(batch)
    assert all(a == 0.0 for a, pad in zip(advantages, padding, strict=True) if pad)


def test_hook_with_every_group_dropped_leaves_only_noop_rows(config: Any, worker: Any) -> None:
    groups = random_groups(random.Random(5), GROUPS, 2 * G)
    for group in groups:  # all rewards 0: every group uniform
        for index, rollout in enumerate(group):
            group[index] = type(rollout)(**{**rollout.__dict__, "reward": 0.0})
    batch = run_async(to_batch(worker, groups))
    metrics: dict[str, Any] = {}
    trainer_for(config, worker, dp_size=2)._balance_batch(batch, metrics)
    assert metrics["roc/dropped_ratio"] == 1.0 and metrics["roc/kept_rollouts"] == 0
    assert len(batch) == GROUPS * G and batch.batch["response_mask"].sum() == 0
