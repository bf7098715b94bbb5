"""The supervised warm start (the report's cold-start SFT in miniature).

RL cannot start from a random model: it would never write a valid tool call. This script
trains the toy model on a mix of behaviours and saves model and tokenizer; the result is kept
in the repository as a small fixture (``trainer/toy/warmstart/``), re-derived by
``python -m trainer.toy.warmstart --out trainer/toy/warmstart``.
"""

import argparse
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerFast, Qwen2ForCausalLM

from trainer.toy.model import build_model
from trainer.toy.task import Behaviour, Segment, demonstration, random_operands
from trainer.toy.tokenizer import build_tokenizer

FIXTURE_DIR = Path(__file__).parent / "warmstart"
MIX: dict[Behaviour, float] = {"direct": 0.5, "tool": 0.3, "fix": 0.2}


@dataclass(frozen=True)
class WarmStartConfig:
    """Supervised warm-start settings."""

    steps: int = 1600
    batch_size: int = 32
    max_lr: float = 3e-3
    seed: int = 0


def encode_segments(
    tokenizer: PreTrainedTokenizerFast, segments: list[Segment]
) -> tuple[list[int], list[int]]:
    """Token ids and per-token loss mask (1 where the segment is trained on)."""
    ids: list[int] = []
    mask: list[int] = []
    for text, trained in segments:
        piece = tokenizer.encode(text, add_special_tokens=False)
        ids.extend(piece)
        mask.extend([int(trained)] * len(piece))
    return ids, mask


def make_batch(
    tokenizer: PreTrainedTokenizerFast, size: int, rng: random.Random
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ids ``[batch, seq]`` and target mask ``[batch, seq - 1]``."""
    behaviours = rng.choices(list(MIX), weights=list(MIX.values()), k=size)
    rows = [
        encode_segments(tokenizer, demonstration(*random_operands(rng), behaviour, rng))
        for behaviour in behaviours
    ]
    length = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([r + [pad] * (length - len(r)) for r, _ in rows])  # [batch, seq]
    mask = torch.tensor([m + [0] * (length - len(m)) for _, m in rows])  # [batch, seq]
    return ids, mask[:, 1:]


def train_warm_start(config: WarmStartConfig) -> tuple[Qwen2ForCausalLM, PreTrainedTokenizerFast]:
    """Trains a fresh toy model on demonstrations; loss on the model's own tokens only."""
    rng = random.Random(config.seed)
    tokenizer = build_tokenizer()
    model = build_model(config.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.max_lr)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, config.max_lr, config.steps)
    model.train()
    for step in range(config.steps):
        ids, mask = make_batch(tokenizer, config.batch_size, rng)
        logits = model(input_ids=ids).logits[:, :-1]  # [batch, seq - 1, vocab]
        losses = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[:, 1:], reduction="none"
        )  # [batch, seq - 1]
        loss = (losses * mask).sum() / mask.sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == config.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}")
    return model, tokenizer


def main() -> None:
    """Command line: ``python -m trainer.toy.warmstart --out DIR``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=FIXTURE_DIR)
    parser.add_argument("--steps", type=int, default=WarmStartConfig.steps)
    parser.add_argument("--seed", type=int, default=WarmStartConfig.seed)
    args = parser.parse_args()
    torch.set_flush_denormal(True)  # denormals slow CPU math ~10x as the loss falls
    torch.set_num_threads(1)  # tiny tensors: more threads only spin (5x slower under load)
    started_s = time.perf_counter()
    model, tokenizer = train_warm_start(WarmStartConfig(steps=args.steps, seed=args.seed))
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    print(f"saved to {args.out} in {time.perf_counter() - started_s:.0f} s")


if __name__ == "__main__":
    main()
