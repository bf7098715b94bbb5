"""Scripted stand-ins for unit tests of the agent loop: a character tokenizer, a generator
that plays written turns, and an executor that answers from a table (the real service is used
in tests/trainer/test_integration_service.py)."""

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from gateway.client import ExecuteItem, ExecuteResult, ServiceError
from trainer.core.agent_loop import Generation, GenerationRequest

EOS = "<|im_end|>"


class CharTokenizer:
    """One token per character (its code point)."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


@dataclass
class ScriptedGenerator:
    """Plays ``turns[prompt][k]`` as turn k of the rollout whose prompt text is ``prompt``."""

    turns: dict[str, list[str]]
    stop: bool = True
    requests: list[GenerationRequest] = field(default_factory=list)

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        text = CharTokenizer().decode(request.context_ids)
        prompt = next(p for p in self.turns if text.startswith(p))
        turn = (text.count(EOS) - prompt.count(EOS)) // 2  # a model turn + a tool turn
        ids = CharTokenizer().encode(self.turns[prompt][turn] + (EOS if self.stop else ""))
        return Generation(ids[: request.max_new_tokens], self.stop)


def ok(stdout: str) -> ExecuteResult:
    return ExecuteResult(id="x", status="ok", exit_code=0, stdout=stdout, wall_s=0.01)


@dataclass
class ScriptedExecutor:
    """Answers each call with ``answers[code]``; a callable may await or raise."""

    answers: dict[str, ExecuteResult | Callable[[], object]]
    items: list[ExecuteItem] = field(default_factory=list)

    async def execute(self, item: ExecuteItem) -> ExecuteResult:
        self.items.append(item)
        answer = self.answers[item.code]
        if isinstance(answer, ExecuteResult):
            return answer
        produced = answer()
        if asyncio.iscoroutine(produced):
            produced = await produced
        if isinstance(produced, ExecuteResult):
            return produced
        raise ServiceError(str(produced))
