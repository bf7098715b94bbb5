"""The clipped token-level loss on hand-computed cases."""

import math

import pytest
import torch

from trainer.local.loss import clipped_token_loss


def case(advantage: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    old = torch.zeros(1, 3)  # [batch, seq]
    new = torch.tensor([[math.log(1.5), math.log(0.5), 0.0]], requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0]])  # the third token is a tool token
    return new, old, torch.tensor([advantage]), mask


def test_positive_advantage_clips_the_high_ratio() -> None:
    new, old, advantages, mask = case(+1.0)
    # ratios 1.5, 0.5 -> clipped 1.28, 0.8; min(1.5, 1.28) = 1.28, min(0.5, 0.8) = 0.5
    loss, metrics = clipped_token_loss(new, old, advantages, mask, token_count=2)
    assert loss.item() == pytest.approx(-(1.28 + 0.5) / 2)
    assert metrics["loss/clip_fraction"] == pytest.approx(0.5)
    loss.backward()
    assert new.grad is not None
    # Token 0 is clipped (no gradient); token 1: d(-rho*A/2)/dlogp = -0.5/2; token 2 masked.
    assert new.grad[0].tolist() == pytest.approx([0.0, -0.25, 0.0])


def test_negative_advantage_clips_the_low_ratio() -> None:
    new, old, advantages, mask = case(-1.0)
    # -1.5 vs -1.28 -> -1.5; -0.5 vs -0.8 -> -0.8
    loss, metrics = clipped_token_loss(new, old, advantages, mask, token_count=2)
    assert loss.item() == pytest.approx((1.5 + 0.8) / 2)
    assert metrics["loss/clip_fraction"] == pytest.approx(0.5)


def test_clip_bounds_are_asymmetric() -> None:
    old = torch.zeros(1, 2)
    new = torch.log(torch.tensor([[1.27, 0.81]]))
    loss, metrics = clipped_token_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2), 2)
    assert metrics["loss/clip_fraction"] == 0.0  # both inside [0.8, 1.28]
    assert loss.item() == pytest.approx(-(1.27 + 0.81) / 2)
    loss, metrics = clipped_token_loss(new, old, torch.tensor([1.0]), torch.ones(1, 2), 2, 0.2, 0.2)
    assert metrics["loss/clip_fraction"] == 0.5  # 1.27 > 1.2 under symmetric clipping


def test_mean_is_over_tokens_not_sequences() -> None:
    # One 1-token sequence with A = +1 and one 3-token sequence with A = -1, ratio 1:
    # token mean -(1 - 3) / 4 = 0.5 (a per-sequence mean would give 0).
    logprobs = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    loss, _ = clipped_token_loss(logprobs, logprobs, torch.tensor([1.0, -1.0]), mask, 4)
    assert loss.item() == pytest.approx(0.5)


def test_micro_batches_sum_to_the_full_batch_loss() -> None:
    torch.manual_seed(0)
    new, old = torch.randn(4, 5), torch.randn(4, 5)
    advantages = torch.tensor([1.0, -0.5, 2.0, -1.0])
    mask = (torch.rand(4, 5) > 0.3).float()
    tokens = int(mask.sum().item())
    full, _ = clipped_token_loss(new, old, advantages, mask, tokens)
    halves = [clipped_token_loss(new[s], old[s], advantages[s], mask[s], tokens)[0]
              for s in (slice(0, 2), slice(2, 4))]  # fmt: skip
    assert (halves[0] + halves[1]).item() == pytest.approx(full.item())
