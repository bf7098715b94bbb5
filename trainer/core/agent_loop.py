"""The multi-turn agent loop over a token-in/token-out generator and the python tool.

Each turn: generate until EOS, parse tool calls, run them on the service at once (as soon as
the turn is generated), append their responses as a user turn masked out of the loss. A
rollout stops on a turn without a tool call, at the turn limit, or when its token budget runs
out. Many rollouts run concurrently, one coroutine each; the generator may batch them.
"""

import asyncio
from dataclasses import dataclass
from typing import Protocol

from gateway.client import ServiceError
from trainer.core.chat import ChatFormat, Tokenizer
from trainer.core.timing import ActivityClock
from trainer.core.tool_calls import InvalidCall, ParsedCall, parse_tool_calls
from trainer.core.tools import Tool, ToolCallRecord
from trainer.core.trajectory import Finish, Trajectory


@dataclass(frozen=True)
class GenerationRequest:
    """Continue ``context_ids`` (prompt and response so far) by at most ``max_new_tokens``."""

    context_ids: list[int]
    max_new_tokens: int


@dataclass(frozen=True)
class Generation:
    """New tokens; ``stopped`` is True when they end with the EOS (the turn is complete)."""

    token_ids: list[int]
    stopped: bool


class Generator(Protocol):
    """Token-in/token-out sampling: the HF backend here, an inference server under verl."""

    async def generate(self, request: GenerationRequest) -> Generation:
        """Samples one continuation."""
        ...


@dataclass(frozen=True)
class LoopLimits:
    """Turn and token budgets of one rollout."""

    max_turns: int = 10
    max_response_tokens: int = 8192
    max_tokens_per_turn: int = 8192
    max_calls_per_turn: int = 4


class AgentLoop:
    """Runs rollouts: ``await loop.run(prompt_ids)`` gives one :class:`Trajectory`."""

    def __init__(
        self,
        generator: Generator,
        tool: Tool,
        tokenizer: Tokenizer,
        limits: LoopLimits,
        chat: ChatFormat | None = None,
        clock: ActivityClock | None = None,
    ) -> None:
        self.generator = generator
        self.tool = tool
        self.tokenizer = tokenizer
        self.limits = limits
        self.chat = chat or ChatFormat()
        self.clock = clock or ActivityClock()

    async def run(self, prompt_ids: list[int], tool: Tool | None = None) -> Trajectory:
        """One rollout from ``prompt_ids`` (which end with the assistant header).

        ``tool`` replaces the loop's own for this rollout (a stateful tool is per rollout).
        """
        trajectory = Trajectory(prompt_ids=list(prompt_ids))
        tool = tool or self.tool
        for turn in range(self.limits.max_turns):
            is_last = turn == self.limits.max_turns - 1
            if not await self._turn(trajectory, tool, is_last):
                break
        return trajectory

    async def _turn(self, trajectory: Trajectory, tool: Tool, is_last: bool) -> bool:
        """Plays one turn; False when the rollout is over (``finish`` set)."""
        budget = self.limits.max_response_tokens - len(trajectory.response_ids)
        max_new_tokens = min(self.limits.max_tokens_per_turn, budget)
        context = trajectory.prompt_ids + trajectory.response_ids
        generation = await self.generator.generate(GenerationRequest(context, max_new_tokens))
        trajectory.append(generation.token_ids, trained=True)
        text = self.tokenizer.decode(generation.token_ids)
        trajectory.turn_texts.append(text)
        if not generation.stopped:
            trajectory.finish = Finish.TRUNCATED
            return False
        calls = parse_tool_calls(text, tool.settings.tool_names)
        if not calls:
            trajectory.finish = Finish.DONE
            return False
        try:
            responses = await self._run_calls(calls, trajectory, tool)
        except ServiceError as exc:
            trajectory.finish = Finish.SERVICE_FAILED
            trajectory.service_problem = str(exc)
            return False
        if is_last:  # the calls ran and count, but no turn is left to read their output
            trajectory.finish = Finish.MAX_TURNS
            return False
        return self._append_responses(trajectory, responses)

    async def _run_calls(
        self, calls: list[ParsedCall], trajectory: Trajectory, tool: Tool
    ) -> list[str]:
        limit = self.limits.max_calls_per_turn
        over = InvalidCall(f"too many tool calls in one turn: only the first {limit} run")
        calls = calls[:limit] + [over] * max(0, len(calls) - limit)
        with self.clock.span("service"):
            outcomes = await asyncio.gather(
                *(tool.run(call) for call in calls), return_exceptions=True
            )
        texts: list[str] = []
        records: list[ToolCallRecord] = []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome
            texts.append(outcome[0])
            records.append(outcome[1])
        trajectory.tool_calls.extend(records)
        return texts

    def _append_responses(self, trajectory: Trajectory, responses: list[str]) -> bool:
        tool_ids = self.tokenizer.encode(self.chat.tool_turn(responses))
        # Leave room for at least one model token after the responses.
        if len(trajectory.response_ids) + len(tool_ids) >= self.limits.max_response_tokens:
            trajectory.finish = Finish.TRUNCATED
            return False
        trajectory.append(tool_ids, trained=False)
        return True
