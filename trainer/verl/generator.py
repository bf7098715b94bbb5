"""``trainer.core``'s token-in/token-out generator over verl's async rollout servers.

verl's ``LLMServerClient.generate`` routes a request to a vLLM or SGLang server (least
in-flight first, then sticky by request id so later turns reuse the prefix cache) and answers
with token ids. One :class:`VerlGenerator` serves one rollout: one request id for all its
turns, and it keeps each turn's log-probabilities for the rollout-correction fields.
"""

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from trainer.core.agent_loop import Generation, GenerationRequest
from trainer.core.timing import ActivityClock


class TokenOutput(Protocol):
    """What verl's servers answer (``verl.workers.rollout.replica.TokenOutput``)."""

    token_ids: list[int]
    log_probs: list[float] | None
    stop_reason: str | None


class ServerClient(Protocol):
    """The part of ``verl.workers.rollout.llm_server.LLMServerClient`` the loop uses."""

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any]
    ) -> Any:
        """Samples a continuation of ``prompt_ids``; returns a :class:`TokenOutput`."""
        ...


class VerlGenerator:
    """One rollout's generator: verl's sampling parameters plus a per-turn token limit.

    A turn is complete (``stopped``) when its last token is one of ``stop_token_ids``; a turn
    cut by the token limit, the context length or an abort is not (the loop then ends the
    rollout as truncated, reward 0).
    """

    def __init__(
        self,
        server: ServerClient,
        sampling_params: Mapping[str, Any],
        stop_token_ids: Sequence[int],
        clock: ActivityClock | None = None,
    ) -> None:
        self.server = server
        self.sampling_params = dict(sampling_params)
        self.stop_token_ids = tuple(dict.fromkeys(stop_token_ids))
        self.clock = clock or ActivityClock()
        self.request_id = uuid.uuid4().hex
        self.turn_logprobs: list[list[float]] | None = []

    async def generate(self, request: GenerationRequest) -> Generation:
        """Samples one assistant turn."""
        params = dict(self.sampling_params)
        params["max_tokens"] = request.max_new_tokens
        params["stop_token_ids"] = sorted(
            set(params.get("stop_token_ids") or ()) | set(self.stop_token_ids)
        )
        with self.clock.span("generate"):
            output = await self.server.generate(
                self.request_id, prompt_ids=list(request.context_ids), sampling_params=params
            )
        token_ids = list(output.token_ids)[: request.max_new_tokens]
        self._keep_logprobs(output.log_probs, len(token_ids))
        stopped = bool(token_ids) and token_ids[-1] in self.stop_token_ids
        return Generation(token_ids, stopped)

    def _keep_logprobs(self, log_probs: Sequence[float] | None, count: int) -> None:
        if self.turn_logprobs is None:
            return
        if log_probs is None or len(log_probs) < count:
            self.turn_logprobs = None  # one turn without them: the rollout has none
            return
        self.turn_logprobs.append([float(p) for p in log_probs[:count]])


def response_logprobs(
    loss_mask: Sequence[int], turn_logprobs: Sequence[Sequence[float]] | None
) -> list[float] | None:
    """Per-response-token log-probabilities: the model's turns in order, 0.0 on tool tokens.

    ``None`` when a turn had none, or when they do not cover the model tokens exactly.
    """
    if turn_logprobs is None:
        return None
    flat = [p for turn in turn_logprobs for p in turn]
    if len(flat) != sum(loss_mask):
        return None
    model_logprobs = iter(flat)
    return [next(model_logprobs) if trained else 0.0 for trained in loss_mask]


class HFTextCodec:
    """A Hugging Face tokenizer as ``trainer.core.chat.Tokenizer``: no added BOS, specials kept."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` as the model sees it inside a conversation."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, chat markers included (the parser needs the exact text)."""
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def token_id(self, token: str) -> int | None:
        """The id of a single (special) token, or None when it is not one token."""
        ids = self.encode(token)
        return ids[0] if len(ids) == 1 else None
