"""One policy update from the kept rollouts: micro-batched token log-probs, loss, AdamW step."""

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from trainer.core.grpo import TrainSample
from trainer.local.batch import TensorBatch, collate
from trainer.local.loss import clipped_token_loss


@dataclass(frozen=True)
class UpdateSettings:
    """The optimisation knobs of one step."""

    eps_low: float
    eps_high: float
    max_grad_norm: float
    updates_per_step: int
    micro_batch_size: int


def token_logprobs(model: PreTrainedModel, batch: TensorBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability of each next token and the policy's entropy there, ``[batch, seq - 1]``."""
    logits = model(input_ids=batch.ids, attention_mask=batch.attention).logits  # [b, seq, vocab]
    logp_all = torch.log_softmax(logits[:, :-1].float(), dim=-1)  # [b, seq - 1, vocab]
    logprobs = logp_all.gather(-1, batch.ids[:, 1:, None]).squeeze(-1)  # [b, seq - 1]
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)  # [b, seq - 1]
    return logprobs, entropy


def _chunks(samples: Sequence[TrainSample], size: int) -> list[list[TrainSample]]:
    return [list(samples[i : i + size]) for i in range(0, len(samples), size)]


def policy_update(
    model: PreTrainedModel,
    optimizer: torch.optim.Optimizer,
    samples: Sequence[TrainSample],
    settings: UpdateSettings,
    pad_id: int,
    rng: random.Random,
) -> dict[str, float]:
    """``updates_per_step`` optimizer steps over shuffled mini-batches of ``samples``."""
    device = next(model.parameters()).device
    order = list(samples)
    rng.shuffle(order)
    minibatch_size = -(-len(order) // settings.updates_per_step)
    minibatches = _chunks(order, minibatch_size)
    # With one update the old policy is the current one: reuse its log-probs (ratio = 1).
    old = None if len(minibatches) == 1 else _old_logprobs(model, minibatches, settings, pad_id)
    totals: dict[str, float] = {}
    model.train()
    for index, minibatch in enumerate(minibatches):
        micro = [
            collate(c, pad_id).to(device) for c in _chunks(minibatch, settings.micro_batch_size)
        ]
        token_count = sum(b.model_tokens for b in micro)
        optimizer.zero_grad(set_to_none=True)
        for m_index, batch in enumerate(micro):
            logprobs, entropy = token_logprobs(model, batch)
            old_logprobs = logprobs.detach() if old is None else old[index][m_index]
            loss, metrics = clipped_token_loss(
                logprobs, old_logprobs, batch.advantages, batch.target_mask, token_count,
                settings.eps_low, settings.eps_high,
            )  # fmt: skip
            loss.backward()
            weight = metrics["loss/tokens"] / max(1, token_count) / len(minibatches)
            _accumulate(totals, "loss/policy", loss.item() / len(minibatches))
            for key in ("loss/clip_fraction", "loss/approx_kl"):
                _accumulate(totals, key, metrics[key] * weight)
            entropy_sum = (entropy * batch.target_mask).sum().item()
            _accumulate(
                totals, "loss/entropy", entropy_sum / max(1, token_count) / len(minibatches)
            )
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
        _accumulate(totals, "loss/grad_norm", grad_norm.item() / len(minibatches))
        optimizer.step()
    totals["loss/model_tokens"] = float(sum(sum(s.trajectory.loss_mask) for s in samples))
    return totals


def _accumulate(totals: dict[str, float], key: str, value: float) -> None:
    totals[key] = totals.get(key, 0.0) + value


@torch.no_grad()
def _old_logprobs(
    model: PreTrainedModel,
    minibatches: list[list[TrainSample]],
    settings: UpdateSettings,
    pad_id: int,
) -> list[list[torch.Tensor]]:
    device = next(model.parameters()).device
    model.eval()
    return [
        [token_logprobs(model, collate(c, pad_id).to(device))[0]
         for c in _chunks(minibatch, settings.micro_batch_size)]
        for minibatch in minibatches
    ]  # fmt: skip
