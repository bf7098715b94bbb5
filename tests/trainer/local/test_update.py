"""A policy update moves probability towards positive advantages and away from negative."""

import random

import torch

from trainer.core.grpo import TrainSample
from trainer.core.trajectory import Trajectory
from trainer.local.batch import collate
from trainer.local.update import UpdateSettings, policy_update, token_logprobs
from trainer.toy.model import build_model

SETTINGS = UpdateSettings(eps_low=0.2, eps_high=0.28, max_grad_norm=1.0,
                          updates_per_step=1, micro_batch_size=1)  # fmt: skip


def mean_logprob(model: torch.nn.Module, sample: TrainSample) -> float:
    batch = collate([sample], pad_id=0)
    with torch.no_grad():
        logprobs, _ = token_logprobs(model, batch)  # type: ignore[arg-type]
    return float((logprobs * batch.target_mask).sum() / batch.target_mask.sum())


def test_update_follows_the_advantage_sign() -> None:
    model = build_model(seed=0)
    good = TrainSample(Trajectory([2, 4], [10, 11, 12], [1, 0, 1]), advantage=1.0, reward=1.0)
    bad = TrainSample(Trajectory([2, 4], [13, 14], [1, 1]), advantage=-1.0, reward=0.0)
    before = mean_logprob(model, good), mean_logprob(model, bad)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    for _ in range(3):
        metrics = policy_update(model, optimizer, [good, bad], SETTINGS, 0, random.Random(0))

    after = mean_logprob(model, good), mean_logprob(model, bad)
    assert after[0] > before[0] and after[1] < before[1]
    assert metrics["loss/model_tokens"] == 4.0
    assert metrics["loss/grad_norm"] > 0
    assert metrics["loss/entropy"] > 0


def test_several_updates_per_step_use_the_old_policy_and_clip() -> None:
    model = build_model(seed=0)
    samples = [TrainSample(Trajectory([2], [10 + i, 11], [1, 1]), (-1.0) ** i, 1.0)
               for i in range(4)]  # fmt: skip
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-2)
    settings = UpdateSettings(0.2, 0.28, 1.0, updates_per_step=4, micro_batch_size=2)
    metrics = policy_update(model, optimizer, samples, settings, 0, random.Random(0))
    assert metrics["loss/approx_kl"] > 0  # later mini-batches are off-policy
