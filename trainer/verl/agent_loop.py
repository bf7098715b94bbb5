"""``codepool_agent``: verl's agent-loop plugin running ``trainer.core``'s multi-turn loop.

verl's ``AgentLoopWorker`` builds one of these per trajectory (from the registry entry in
``config/agent_loop.yaml``) and calls :meth:`CodepoolAgentLoop.run` with the dataset row.
The loop generates through verl's async rollout servers, runs tool calls on codepool over
HTTP, scores the answer, and returns prompt/response ids, the response mask (tool tokens 0),
the reward and per-trajectory tool statistics (``trainer.verl.fields``).
"""

from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, register

from trainer.core.agent_loop import AgentLoop, LoopLimits
from trainer.core.chat import ChatFormat
from trainer.core.grpo import make_rollout
from trainer.core.timing import ActivityClock
from trainer.core.tools import PythonTool, ToolSettings
from trainer.verl.generator import HFTextCodec, VerlGenerator
from trainer.verl.output import build_output
from trainer.verl.resources import shared_resources
from trainer.verl.settings import CodepoolSettings, settings_from_config

AGENT_NAME = "codepool_agent"


def loop_limits(rollout_config: Any, settings: CodepoolSettings) -> LoopLimits:
    """Turn and token budgets from verl's rollout keys (stated once, used by both)."""
    max_turns = rollout_config.multi_turn.max_assistant_turns
    if not max_turns:
        raise ValueError("set actor_rollout_ref.rollout.multi_turn.max_assistant_turns")
    budget = int(rollout_config.response_length)
    per_turn = settings.max_tokens_per_turn or budget
    return LoopLimits(
        max_turns=int(max_turns),
        max_response_tokens=budget,
        max_tokens_per_turn=min(per_turn, budget),
        max_calls_per_turn=settings.max_calls_per_turn,
    )


def tool_settings(settings: CodepoolSettings) -> ToolSettings:
    """How calls are sent to codepool and shown to the model."""
    return ToolSettings(
        timeout_s=settings.tool_timeout_s,
        memory_mb=settings.tool_memory_mb or None,
        max_output_chars=settings.max_tool_output_chars,
    )


def stop_token_ids(codec: HFTextCodec, chat: ChatFormat, eos_token_id: int | None) -> list[int]:
    """The tokens that end an assistant turn: the chat's end marker and the tokenizer's EOS."""
    end = codec.token_id(chat.end)
    if end is None:
        raise ValueError(f"the tokenizer has no single token for {chat.end!r}")
    return [end] if eos_token_id is None else [end, int(eos_token_id)]


def reference_answer(row: dict[str, Any]) -> str:
    """The gold answer of a verl dataset row (``reward_model.ground_truth``)."""
    reward_model = row.get("reward_model") or {}
    if "ground_truth" not in reward_model:
        raise ValueError("dataset rows need reward_model.ground_truth (see trainer/verl/data.py)")
    return str(reward_model["ground_truth"])


class CodepoolAgentLoop(AgentLoopBase):  # type: ignore[misc]  # verl is untyped
    """One GRPO-RoC rollout per :meth:`run` call."""

    def __init__(self, *args: Any, tools: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = settings_from_config(self.config)
        self.codec = HFTextCodec(self.tokenizer)
        self.chat = ChatFormat()
        self.limits = loop_limits(self.rollout_config, self.settings)
        self.stop_token_ids = stop_token_ids(self.codec, self.chat, self.tokenizer.eos_token_id)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Plays, scores and packs one rollout of the dataset row ``kwargs``."""
        prompt_ids = await self.apply_chat_template(list(kwargs["raw_prompt"]))
        resources = shared_resources(self.settings)
        clock = ActivityClock()
        clock.start()
        generator = VerlGenerator(self.server_manager, sampling_params, self.stop_token_ids, clock)
        tool = PythonTool(resources.client, tool_settings(self.settings))
        loop = AgentLoop(generator, tool, self.codec, self.limits, self.chat, clock)
        trajectory = await loop.run(list(prompt_ids))
        score = await resources.verifier.score(trajectory.model_text, reference_answer(kwargs))
        clock.stop()
        return build_output(make_rollout(trajectory, score), generator.turn_logprobs, clock)


register(AGENT_NAME)(CodepoolAgentLoop)
