"""The batching HF generator: limits, EOS handling, one batch for every joined rollout."""

import asyncio

import torch

from trainer.core.agent_loop import GenerationRequest
from trainer.core.timing import ActivityClock
from trainer.local.generate import HFGenerator, SamplingSettings
from trainer.toy.model import build_model
from trainer.toy.tokenizer import PIECES

EOS = PIECES.index("<|im_end|>")
PAD = PIECES.index("<pad>")


def make_generator(wait_s: float = 5.0) -> HFGenerator:
    model = build_model(seed=3).eval()
    return HFGenerator(model, PAD, EOS, SamplingSettings(max_batch_wait_s=wait_s), ActivityClock())


def test_cut_keeps_the_eos_or_the_rows_own_limit() -> None:
    generator = make_generator()
    assert generator._cut([4, 5, EOS, PAD], 10) == (generator._cut([4, 5, EOS], 3))
    stopped = generator._cut([4, 5, EOS, PAD], 10)
    assert (stopped.token_ids, stopped.stopped) == ([4, 5, EOS], True)
    cut = generator._cut([4, 5, 6, EOS], 2)
    assert (cut.token_ids, cut.stopped) == ([4, 5], False)


async def test_joined_rollouts_share_one_batch_and_respect_their_limits() -> None:
    torch.manual_seed(0)
    generator = make_generator()

    async def rollout(context: list[int], limit: int) -> tuple[list[int], bool]:
        async with generator.participant():
            out = await generator.generate(GenerationRequest(context, limit))
            return out.token_ids, out.stopped

    try:
        results = await asyncio.wait_for(
            asyncio.gather(rollout([2, 4, 6], 3), rollout([2, 4], 7), rollout([2], 1)), 60
        )
    finally:
        await generator.aclose()
    assert generator.batches == 1
    for (tokens, stopped), limit in zip(results, (3, 7, 1), strict=True):
        assert 1 <= len(tokens) <= limit
        assert stopped == (tokens[-1] == EOS)
        assert EOS not in tokens[:-1]


async def test_a_rollout_busy_elsewhere_delays_a_batch_at_most_the_wait() -> None:
    generator = make_generator(wait_s=0.2)
    release = asyncio.Event()

    async def busy() -> None:
        async with generator.participant():
            await release.wait()  # e.g. waiting on a slow tool call

    async def ready() -> list[int]:
        async with generator.participant():
            return (await generator.generate(GenerationRequest([2, 4], 2))).token_ids

    busy_task = asyncio.create_task(busy())
    try:
        tokens = await asyncio.wait_for(ready(), 30)
    finally:
        release.set()
        await busy_task
        await generator.aclose()
    assert tokens and generator.batches == 1
