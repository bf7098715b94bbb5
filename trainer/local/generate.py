"""A batching Hugging Face ``generate`` backend behind the core's token-in/token-out protocol.

Rollouts ask for their next turn one by one; the backend gathers the requests and runs one
``model.generate`` (KV cache, left padding) for all of them in a worker thread, so tool calls
of other rollouts keep flowing meanwhile. A batch starts when every joined rollout is waiting
for generation or ``max_batch_wait_s`` after its first request, whichever comes first.
"""

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass

import torch
from transformers import PreTrainedModel

from trainer.core.agent_loop import Generation, GenerationRequest
from trainer.core.timing import ActivityClock


@dataclass(frozen=True)
class SamplingSettings:
    """How tokens are drawn."""

    temperature: float = 1.0
    top_p: float = 1.0
    max_batch_wait_s: float = 0.5
    max_batch_size: int = 1024


@dataclass
class _Request:
    request: GenerationRequest
    future: asyncio.Future[Generation]
    queued_s: float


class HFGenerator:
    """Implements ``trainer.core.agent_loop.Generator`` with batched ``model.generate``."""

    def __init__(
        self,
        model: PreTrainedModel,
        pad_id: int,
        eos_id: int,
        sampling: SamplingSettings,
        clock: ActivityClock,
    ) -> None:
        self.model = model
        self.pad_id = pad_id
        self.eos_id = eos_id
        self.sampling = sampling
        self.clock = clock
        self.batches = 0
        self._queue: list[_Request] = []
        self._participants = 0
        self._changed = asyncio.Event()
        self._worker: asyncio.Task[None] | None = None

    @asynccontextmanager
    async def participant(self) -> AsyncIterator[None]:
        """Counts one rollout in: batches wait for it while it lives."""
        self._participants += 1
        try:
            yield
        finally:
            self._participants -= 1
            self._changed.set()

    async def generate(self, request: GenerationRequest) -> Generation:
        """Queues ``request`` for the next batch and waits for its tokens."""
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._run())
        future: asyncio.Future[Generation] = asyncio.get_running_loop().create_future()
        self._queue.append(_Request(request, future, time.perf_counter()))
        self._changed.set()
        return await future

    async def aclose(self) -> None:
        """Stops the batching task."""
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await self._wait_for_batch()
            batch = self._queue[: self.sampling.max_batch_size]
            del self._queue[: len(batch)]
            try:
                with self.clock.span("generate"):
                    outputs = await asyncio.to_thread(self._generate, [b.request for b in batch])
            except Exception as exc:  # a failed batch fails its callers, not the worker
                for item in batch:
                    item.future.set_exception(exc)
                continue
            self.batches += 1
            for item, output in zip(batch, outputs, strict=True):
                if not item.future.done():
                    item.future.set_result(output)

    async def _wait_for_batch(self) -> None:
        while True:
            if self._queue:
                if len(self._queue) >= self._participants:
                    return
                left_s = self._queue[0].queued_s + self.sampling.max_batch_wait_s
                left_s -= time.perf_counter()
                if left_s <= 0:
                    return
            else:
                left_s = None
            self._changed.clear()
            with suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left_s)

    @torch.no_grad()
    def _generate(self, requests: list[GenerationRequest]) -> list[Generation]:
        device = self.model.device
        length = max(len(r.context_ids) for r in requests)
        ids = torch.full((len(requests), length), self.pad_id, dtype=torch.long)  # [batch, seq]
        attention = torch.zeros((len(requests), length), dtype=torch.long)  # [batch, seq]
        for row, request in enumerate(requests):  # left padding: every row ends at the prompt
            ids[row, length - len(request.context_ids) :] = torch.tensor(request.context_ids)
            attention[row, length - len(request.context_ids) :] = 1
        output = self.model.generate(  # type: ignore[operator]
            input_ids=ids.to(device),
            attention_mask=attention.to(device),
            do_sample=True,
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            top_k=0,
            max_new_tokens=max(r.max_new_tokens for r in requests),
            eos_token_id=self.eos_id,
            pad_token_id=self.pad_id,
        )
        new_tokens = output[:, length:].tolist()  # [batch, new]
        pairs = zip(new_tokens, requests, strict=True)
        return [self._cut(tokens, request.max_new_tokens) for tokens, request in pairs]

    def _cut(self, tokens: list[int], max_new_tokens: int) -> Generation:
        """The row's own tokens: up to its EOS (kept), or its own token limit."""
        tokens = tokens[:max_new_tokens]
        if self.eos_id in tokens:
            return Generation(tokens[: tokens.index(self.eos_id) + 1], stopped=True)
        return Generation(tokens, stopped=False)
