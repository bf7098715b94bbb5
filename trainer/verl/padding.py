"""No-op rows that make a batch's size a multiple of what verl's update needs.

After RoC the batch size varies (dropped groups), but verl splits it evenly across data
parallel ranks and into PPO mini-batches of a fixed size. Like verl's v1 trainer
(``verl.trainer.ppo.padding_utils``), we append rows of one prompt token and one response
token with response mask 0 and reward 0: they add nothing to the token-mean loss and, under
a uid of their own, get advantage 0.
"""

import uuid
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict
from verl.trainer.ppo.padding_utils import build_padding_position_ids

from trainer.verl import fields


def padded_size(size: int, multiple: int) -> int:
    """The smallest multiple of ``multiple`` that holds ``size`` rows (at least one)."""
    return max(multiple, -(-size // multiple) * multiple)


def noop_tensors(template: TensorDict, count: int, pad_token_id: int) -> TensorDict:
    """``count`` no-op rows with the keys and widths of ``template``'s rows."""
    prompt_width = template["prompts"].shape[-1]
    attention = torch.zeros_like(template["attention_mask"][:1])  # [1, prompt + response]
    attention[0, prompt_width - 1 : prompt_width + 1] = 1  # last prompt slot, first response slot
    row = {key: torch.zeros_like(value[:1]) for key, value in template.items()}
    row["attention_mask"] = attention
    for key in ("input_ids", "prompts", "responses"):
        row[key] = torch.full_like(template[key][:1], pad_token_id)
    position_ids = build_padding_position_ids(template["position_ids"][0], attention[0])
    row["position_ids"] = position_ids.unsqueeze(0)
    tensors = {key: value.expand(count, *value.shape[1:]).clone() for key, value in row.items()}
    return TensorDict(tensors, batch_size=(count,))


def noop_columns(template: dict[str, np.ndarray], count: int) -> dict[str, np.ndarray]:
    """The non-tensor columns of ``count`` no-op rows: a first row's values, a uid of their own."""
    columns: dict[str, np.ndarray] = {}
    for key, value in template.items():
        column = np.empty(count, dtype=object)
        column[:] = [value[0]] * count
        columns[key] = column
    pad_uid = f"pad-{uuid.uuid4().hex}"
    columns["uid"] = np.array([pad_uid] * count, dtype=object)
    columns[fields.USABLE] = np.array([False] * count, dtype=object)
    columns[fields.PADDING] = np.array([True] * count, dtype=object)
    for score in (fields.REWARD, fields.VERL_SCORE):
        if score in columns:
            columns[score] = np.zeros(count)
    return columns


def pad_batch(batch: Any, multiple: int, pad_token_id: int, template: Any) -> int:
    """Appends no-op rows to ``batch`` (a ``DataProto``) in place up to a multiple of ``multiple``.

    ``template`` (a ``DataProto`` with at least one row) gives the rows' keys and widths: the
    batch itself may have no row left. Returns the number of rows added.
    """
    count = padded_size(len(batch), multiple) - len(batch)
    if count == 0:
        return 0
    tensors = noop_tensors(template.batch, count, pad_token_id)
    columns = noop_columns(template.non_tensor_batch, count)
    batch.batch = torch.cat([batch.batch, tensors], dim=0)
    batch.non_tensor_batch = {
        key: np.concatenate([value, columns[key]]) for key, value in batch.non_tensor_batch.items()
    }
    return count
