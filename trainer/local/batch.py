"""Training samples as padded tensors: ids, attention, per-target loss mask, advantages."""

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from trainer.core.grpo import TrainSample


@dataclass(frozen=True)
class TensorBatch:
    """Right-padded sequences; ``target_mask[b, t]`` = 1 when token t+1 is a model token."""

    ids: torch.Tensor  # [batch, seq]
    attention: torch.Tensor  # [batch, seq]
    target_mask: torch.Tensor  # [batch, seq - 1]
    advantages: torch.Tensor  # [batch]

    def to(self, device: torch.device) -> "TensorBatch":
        """The same batch on ``device``."""
        return TensorBatch(
            self.ids.to(device),
            self.attention.to(device),
            self.target_mask.to(device),
            self.advantages.to(device),
        )

    @property
    def model_tokens(self) -> int:
        """Tokens the loss is averaged over."""
        return int(self.target_mask.sum().item())


def collate(samples: Sequence[TrainSample], pad_id: int) -> TensorBatch:
    """Prompt + response per row; tool-response and prompt tokens are masked out."""
    rows = [s.trajectory.prompt_ids + s.trajectory.response_ids for s in samples]
    length = max(len(row) for row in rows)
    ids = torch.full((len(rows), length), pad_id, dtype=torch.long)  # [batch, seq]
    attention = torch.zeros((len(rows), length), dtype=torch.long)  # [batch, seq]
    token_mask = torch.zeros((len(rows), length), dtype=torch.float32)  # [batch, seq]
    for row, (sample, tokens) in enumerate(zip(samples, rows, strict=True)):
        ids[row, : len(tokens)] = torch.tensor(tokens)
        attention[row, : len(tokens)] = 1
        start = len(sample.trajectory.prompt_ids)
        token_mask[row, start : len(tokens)] = torch.tensor(
            sample.trajectory.loss_mask, dtype=torch.float32
        )
    advantages = torch.tensor([s.advantage for s in samples], dtype=torch.float32)  # [batch]
    return TensorBatch(ids, attention, token_mask[:, 1:], advantages)
