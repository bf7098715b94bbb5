"""RoC on verl's batch: group rows by prompt ``uid``, select with ``trainer.core.roc``.

:func:`select_rows` takes plain sequences (uids, rewards, penalties, usability) so it runs on
a ``DataProto``'s columns here and would run unchanged on verl's v1 replay-buffer tags. Groups
are visited in order of first appearance and rows in batch order, so with the same random
generator it keeps exactly what ``trainer.core.grpo.select_rollouts`` keeps.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer.core.roc import DropReason, RocMode, RocSample, select_group
from trainer.verl import fields


@dataclass
class RowSelection:
    """Rows kept (ascending batch indices) and what happened to each group."""

    kept: list[int] = field(default_factory=list)
    groups: int = 0
    unusable_rows: int = 0
    dropped: dict[DropReason, int] = field(default_factory=lambda: dict.fromkeys(DropReason, 0))


def group_rows(uids: Sequence[Any]) -> list[list[int]]:
    """Row indices per uid, groups in order of first appearance, rows in batch order."""
    groups: dict[Any, list[int]] = {}
    for row, uid in enumerate(uids):
        groups.setdefault(uid, []).append(row)
    return list(groups.values())


def select_rows(
    uids: Sequence[Any],
    rewards: Sequence[float],
    p_err: Sequence[float],
    p_format: Sequence[float],
    usable: Sequence[bool],
    group_size: int,
    mode: RocMode,
    rng: random.Random,
) -> RowSelection:
    """RoC per prompt group over its usable rows (service failures are never trained on)."""
    selection = RowSelection()
    for rows in group_rows(uids):
        selection.groups += 1
        usable_rows = [row for row in rows if usable[row]]
        selection.unusable_rows += len(rows) - len(usable_rows)
        samples = [
            RocSample(float(rewards[r]), float(p_err[r]), float(p_format[r])) for r in usable_rows
        ]
        chosen = select_group(samples, group_size, mode, rng)
        if chosen.dropped is not None:
            selection.dropped[chosen.dropped] += 1
            continue
        selection.kept.extend(usable_rows[i] for i in chosen.kept)
    selection.kept.sort()
    return selection


def batch_rewards(batch: Any) -> np.ndarray:
    """Sequence rewards as verl will train on them: the sum of ``rm_scores`` per row."""
    if "rm_scores" not in batch.batch.keys():  # noqa: SIM118 (TensorDict has no `in`)
        raise ValueError("RoC needs rewards before advantages: use the codepool_agent agent loop")
    return np.asarray(batch.batch["rm_scores"].sum(dim=-1).float().cpu().numpy())


def select_batch(batch: Any, group_size: int, mode: RocMode, rng: random.Random) -> RowSelection:
    """RoC on a ``DataProto`` whose rows carry ``uid`` and the codepool fields."""
    columns = batch.non_tensor_batch
    missing = [
        name
        for name in (fields.P_ERR, fields.P_FORMAT, fields.USABLE, "uid")
        if name not in columns
    ]
    if missing:
        raise ValueError(f"the batch lacks {missing}: rollouts must come from codepool_agent")
    return select_rows(
        uids=list(columns["uid"]),
        rewards=batch_rewards(batch).tolist(),
        p_err=[float(v) for v in columns[fields.P_ERR]],
        p_format=[float(v) for v in columns[fields.P_FORMAT]],
        usable=[bool(v) for v in columns[fields.USABLE]],
        group_size=group_size,
        mode=mode,
        rng=rng,
    )


def keep_rows(batch: Any, rows: Sequence[int]) -> None:
    """Shrinks ``batch`` in place to ``rows`` (verl's fit keeps using the same object)."""
    selected = batch.select_idxs(np.asarray(rows, dtype=np.int64))
    batch.batch = selected.batch
    batch.non_tensor_batch = selected.non_tensor_batch
