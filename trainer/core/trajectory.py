"""One rollout as tokens and as events: what the loss, the reward and RoC read."""

from dataclasses import dataclass, field
from enum import StrEnum

from trainer.core.tools import ToolCallRecord


class Finish(StrEnum):
    """Why a rollout stopped."""

    DONE = "done"  # a turn without a tool call: the model's final answer (or none)
    MAX_TURNS = "max_turns"  # the last allowed turn still called a tool
    TRUNCATED = "truncated"  # the token budget ran out (reward 0, as in the report)
    SERVICE_FAILED = "service_failed"  # infrastructure failure: left out of the update


@dataclass
class Trajectory:
    """Prompt and response ids, the loss mask (1 = model token, 0 = tool token), the events."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turn_texts: list[str] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    finish: Finish = Finish.DONE
    service_problem: str = ""

    @property
    def num_turns(self) -> int:
        """Assistant turns generated."""
        return len(self.turn_texts)

    @property
    def model_text(self) -> str:
        """Everything the model wrote, tool responses excluded: where the answer is read."""
        return "".join(self.turn_texts)

    @property
    def num_tool_errors(self) -> int:
        """Calls that failed: invalid, error, timeout, or over a limit."""
        return sum(record.outcome.is_error for record in self.tool_calls)

    @property
    def usable(self) -> bool:
        """False when the service failed under it: such a rollout is never trained on."""
        return self.finish is not Finish.SERVICE_FAILED

    def append(self, ids: list[int], trained: bool) -> None:
        """Appends tokens, masked in (model) or out (tool responses, chat scaffolding)."""
        self.response_ids.extend(ids)
        self.loss_mask.extend([int(trained)] * len(ids))
