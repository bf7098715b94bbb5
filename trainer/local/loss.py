"""The clipped surrogate of GRPO-RoC (Eq. 6): Clip-Higher, token-level mean, no KL, no entropy."""

import torch

EPS_LOW = 0.2
EPS_HIGH = 0.28


def clipped_token_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    token_count: int,
    eps_low: float = EPS_LOW,
    eps_high: float = EPS_HIGH,
) -> tuple[torch.Tensor, dict[str, float]]:
    """-sum_t min(rho*A, clip(rho, 1-eps_low, 1+eps_high)*A) / token_count over masked tokens.

    ``token_count`` is the number of model tokens in the whole update batch, so summing the
    losses of its micro-batches gives the token-level mean of the report.
    """
    mask = mask.to(logprobs.dtype)  # [batch, seq]
    log_ratio = logprobs - old_logprobs  # [batch, seq]
    ratio = torch.exp(log_ratio)  # [batch, seq]
    advantage = advantages[:, None]  # [batch, 1]
    unclipped = ratio * advantage  # [batch, seq]
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantage  # [batch, seq]
    surrogate = torch.minimum(unclipped, clipped)  # [batch, seq]
    loss = -(surrogate * mask).sum() / token_count  # []
    with torch.no_grad():
        tokens = mask.sum().clamp(min=1.0)  # []
        clip_fraction = ((clipped < unclipped).to(mask.dtype) * mask).sum() / tokens
        approx_kl = (((ratio - 1.0) - log_ratio) * mask).sum() / tokens  # k3 estimator
    metrics = {
        "loss/clip_fraction": clip_fraction.item(),
        "loss/approx_kl": approx_kl.item(),
        "loss/tokens": mask.sum().item(),
    }
    return loss, metrics
