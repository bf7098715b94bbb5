"""verl's GRPO advantage and clipped loss, as our config sets them, against the report's formulas.

The report (Eq. 6-7): A_i = (r_i - mean(r)) / std(r) over the kept group; the loss is
-1/sum|o_i| * sum_i sum_t min(rho*A, clip(rho, 1-0.2, 1+0.28)*A) over model tokens only;
no KL term, no entropy term.
"""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from trainer.core.advantage import group_advantages

EPS_LOW, EPS_HIGH = 0.2, 0.28


@pytest.fixture(scope="module")
def config(compose: Any, model_dir: Path) -> Any:
    return compose("rstar2_stage1", [f"actor_rollout_ref.model.path={model_dir}"])


@pytest.fixture(scope="module")
def actor_config(config: Any) -> Any:
    from verl.utils.config import omega_conf_to_dataclass

    return omega_conf_to_dataclass(config.actor_rollout_ref.actor)


def test_grpo_advantage_is_core_group_advantage(config: Any) -> None:
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage

    rewards = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]
    uids = ["a"] * 4 + ["b"] * 4
    mask = torch.tensor([[1, 1, 0, 1]] * 8)  # a tool token in the middle
    scores = torch.zeros(8, 4)
    scores[:, -1] = torch.tensor(rewards)  # verl keeps the reward on the last token
    batch = DataProto.from_dict(
        tensors={"token_level_rewards": scores, "response_mask": mask},
        non_tensors={"uid": np.array(uids, dtype=object)},
    )
    algorithm = config.algorithm
    batch = compute_advantage(
        batch,
        adv_estimator=algorithm.adv_estimator,
        norm_adv_by_std_in_grpo=algorithm.norm_adv_by_std_in_grpo,
        config=algorithm,
    )
    advantages = batch.batch["advantages"]
    by_hand = [math.sqrt(3) / 2, -math.sqrt(3) / 2, -math.sqrt(3) / 2, math.sqrt(3) / 2,
               1.5, -0.5, -0.5, -0.5]  # fmt: skip  # unbiased std: sqrt(1/3) and 1/2
    core = group_advantages(rewards[:4]) + group_advantages(rewards[4:])
    assert advantages[:, 0].tolist() == pytest.approx(core, abs=1e-5)
    assert core == pytest.approx(by_hand, abs=1e-5)
    assert torch.all(advantages[:, 2] == 0)  # nothing on the tool token


def paper_loss(
    log_prob: torch.Tensor, old: torch.Tensor, advantage: torch.Tensor, mask: torch.Tensor
) -> torch.Tensor:
    """The report's objective, negated, token by token in plain Python."""
    total = torch.zeros(())
    for i in range(log_prob.shape[0]):
        for t in range(log_prob.shape[1]):
            if mask[i, t]:
                rho = torch.exp(log_prob[i, t] - old[i, t])
                a = advantage[i, t]
                clipped = torch.clamp(rho, 1 - EPS_LOW, 1 + EPS_HIGH)
                total = total - torch.minimum(rho * a, clipped * a)
    return total / mask.sum()


def hand_made_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Ratios in every regime: inside, above 1+0.28, below 1-0.2, far above 3 (negative A)."""
    ratios = torch.tensor([[1.1, 1.5, 0.5, 7.0, 1.0], [0.9, 4.0, 1.3, 0.7, 2.0]])
    advantage = torch.tensor([[0.8] * 5, [-1.2] * 5])
    mask = torch.tensor([[1, 1, 1, 0, 1], [1, 1, 1, 1, 0]])  # 0: tool tokens
    old = torch.full((2, 5), -1.0)
    return old + torch.log(ratios), old, advantage, mask


def test_policy_loss_is_the_report_objective(actor_config: Any) -> None:
    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    log_prob, old, advantage, mask = hand_made_batch()
    log_prob.requires_grad_(True)
    loss_fn = get_policy_loss_fn(actor_config.policy_loss.loss_mode)
    loss, _ = loss_fn(old, log_prob, advantage, mask, actor_config.loss_agg_mode, actor_config)
    (verl_grad,) = torch.autograd.grad(loss, log_prob)
    reference_input = log_prob.detach().clone().requires_grad_(True)
    expected = paper_loss(reference_input, old, advantage, mask)
    (paper_grad,) = torch.autograd.grad(expected, reference_input)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert torch.allclose(verl_grad, paper_grad, atol=1e-7)
    # By hand: row 1 (A=0.8): 1.1, min(1.5,1.28), 0.5 and 1.0 -> 0.8*(1.1+1.28+0.5+1.0);
    # row 2 (A=-1.2): min(rho*A, clip*A) = -1.2*max(rho, clip): 0.9, 4.0, 1.3, 0.8.
    by_hand = -(0.8 * (1.1 + 1.28 + 0.5 + 1.0) - 1.2 * (0.9 + 4.0 + 1.3 + 0.8)) / 8
    assert loss.item() == pytest.approx(by_hand, rel=1e-6)


def test_verl_default_dual_clip_would_differ(actor_config: Any) -> None:
    """Why the config sets clip_ratio_c: verl's default c=3 caps the rho=4 token above."""
    from dataclasses import replace

    from verl.trainer.ppo.core_algos import get_policy_loss_fn

    log_prob, old, advantage, mask = hand_made_batch()
    loss_fn = get_policy_loss_fn("vanilla")
    default, _ = loss_fn(
        old, log_prob, advantage, mask, "token-mean", replace(actor_config, clip_ratio_c=3.0)
    )
    assert default.item() != pytest.approx(
        paper_loss(log_prob, old, advantage, mask).item(), rel=1e-3
    )


def test_no_kl_no_entropy_no_critic(config: Any, actor_config: Any) -> None:
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    assert not need_reference_policy(config) and not need_critic(config)
    assert not config.algorithm.use_kl_in_reward and not actor_config.use_kl_loss
    assert actor_config.entropy_coeff == 0
    assert (actor_config.clip_ratio_low, actor_config.clip_ratio_high) == (EPS_LOW, EPS_HIGH)
    assert actor_config.loss_agg_mode == "token-mean"
