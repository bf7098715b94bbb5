"""verl's PPO trainer with RoC between reward and advantage: one narrow override, no copied fit.

verl 0.9's ``RayPPOTrainer.fit`` has no rollout-filter hook. The one method it calls on the
whole batch after generation (rewards already in ``rm_scores``: the agent loop scores) and
before old log-probs, advantages and the update is ``_balance_batch``. We override it to run
RoC there, in place, then pad with no-op rows to what the update needs and let verl balance.
Everything after (GRPO advantage per uid, the clipped loss) is verl's, configured.
"""

import math
import random
from typing import Any

from verl.trainer.ppo.ray_trainer import RayPPOTrainer

from trainer.verl.metrics import rollout_metrics, selection_metrics
from trainer.verl.padding import pad_batch
from trainer.verl.roc_step import batch_rewards, keep_rows, select_batch
from trainer.verl.settings import settings_from_config


def batch_multiple(config: Any, dp_size: int) -> int:
    """Rows the update needs the batch to be a multiple of: DP ranks and actor mini-batches."""
    mini_batch_rows = int(config.actor_rollout_ref.actor.ppo_mini_batch_size) * int(
        config.actor_rollout_ref.rollout.n
    )
    return math.lcm(dp_size, mini_batch_rows)


def step_rng(seed: int, step: int) -> random.Random:
    """RoC's generator for one step: reproducible across a resume."""
    return random.Random(seed * 1_000_003 + step)


class RocRayPPOTrainer(RayPPOTrainer):  # type: ignore[misc]  # verl is untyped
    """``RayPPOTrainer`` whose post-rollout batch goes through GRPO-RoC first."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.codepool = settings_from_config(self.config)

    def _balance_batch(
        self,
        batch: Any,
        metrics: dict[str, Any],
        logging_prefix: str = "global_seqlen",
        keep_minibatch: bool = False,
    ) -> None:
        """RoC, then no-op padding, then verl's balancing across data-parallel ranks."""
        dp_size = self._get_dp_size(self.actor_rollout_wg, "actor")
        metrics.update(self.resample_on_correct(batch, batch_multiple(self.config, dp_size)))
        super()._balance_batch(batch, metrics, logging_prefix, keep_minibatch)

    def resample_on_correct(self, batch: Any, multiple: int) -> dict[str, float]:
        """Keeps RoC's rows of ``batch`` (in place), pads to ``multiple``; returns metrics."""
        settings = self.codepool
        rewards = batch_rewards(batch).tolist()
        columns = dict(batch.non_tensor_batch)
        rng = step_rng(settings.seed, int(getattr(self, "global_steps", 0)))
        selection = select_batch(batch, settings.group_size, settings.roc_mode, rng)
        template = batch.select_idxs([0])
        keep_rows(batch, selection.kept)
        padding = pad_batch(batch, multiple, self.tokenizer.pad_token_id or 0, template)
        return rollout_metrics(columns, rewards) | selection_metrics(
            columns, rewards, selection, padding
        )
