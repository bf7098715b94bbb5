"""A scripted stand-in for verl's rollout servers (vLLM/SGLang cannot run on this machine).

It answers ``LLMServerClient.generate`` calls with written turns, one list per prompt
(recognised by a marker in the prompt text), as an engine would: the stop token included
when the turn ends, cut at ``max_tokens`` otherwise, one log-probability per token.
"""

from typing import Any

from verl.workers.rollout.replica import TokenOutput

from trainer.verl.generator import HFTextCodec

ASSISTANT_HEADER = "<|im_start|>assistant\n"
END = "<|im_end|>"
LOGPROB = -0.5


class ScriptedServer:
    """Plays ``turns[marker][k]`` as turn k of every rollout whose prompt contains ``marker``.

    A plain class, not a dataclass: hydra would turn a dataclass argument into a config.
    """

    def __init__(self, codec: HFTextCodec, turns: dict[str, list[str]]) -> None:
        self.codec = codec
        self.turns = turns
        self.calls: list[dict[str, Any]] = []

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ) -> TokenOutput:
        self.calls.append({"request_id": request_id, "params": dict(sampling_params)})
        text = self.codec.decode(prompt_ids)
        marker = next(m for m in self.turns if m in text)
        turn = text.count(ASSISTANT_HEADER) - 1
        ids = self.codec.encode(self.turns[marker][turn] + END)
        ids = ids[: sampling_params["max_tokens"]]
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")
