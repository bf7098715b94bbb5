"""Collating samples: ids, attention, the per-target mask, advantages."""

import torch

from trainer.core.grpo import TrainSample
from trainer.core.trajectory import Trajectory
from trainer.local.batch import collate


def test_masks_prompt_tool_tokens_and_padding() -> None:
    long = Trajectory(prompt_ids=[5, 6], response_ids=[7, 8, 9], loss_mask=[1, 0, 1])
    short = Trajectory(prompt_ids=[5], response_ids=[7], loss_mask=[1])
    batch = collate([TrainSample(long, 0.5, 1.0), TrainSample(short, -0.5, 0.0)], pad_id=0)

    assert batch.ids.tolist() == [[5, 6, 7, 8, 9], [5, 7, 0, 0, 0]]
    assert batch.attention.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    # targets are ids[:, 1:]: [6, 7, 8, 9] and [7, pad, pad, pad]
    assert batch.target_mask.tolist() == [[0, 1, 0, 1], [1, 0, 0, 0]]
    assert batch.advantages.tolist() == [0.5, -0.5]
    assert batch.model_tokens == 3
    assert batch.target_mask.dtype == torch.float32
