"""The python tool: runs a parsed call on codepool and renders what the model reads back.

Whether a call was erroneous comes from the result's ``status`` (the report's four outcomes:
output, last-expression value, error with traceback, timeout), never from searching the text.
"""

import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from gateway.client import NO_VERDICT_STATUSES, ExecuteItem, ExecuteResult, ServiceError
from trainer.core.tool_calls import DEFAULT_TOOL_NAMES, CodeCall, ParsedCall, truncate_middle


class CallOutcome(StrEnum):
    """How one tool call ended, as far as the policy is concerned."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    KILLED = "killed"
    INVALID_CALL = "invalid_call"

    @property
    def is_error(self) -> bool:
        """Counts towards p_err: everything but a clean run."""
        return self is not CallOutcome.OK


@dataclass(frozen=True)
class ToolCallRecord:
    """One call's outcome and cost; ``latency_s`` is client-side, 0 for invalid calls."""

    outcome: CallOutcome
    latency_s: float = 0.0
    service_wall_s: float = 0.0
    service_queue_s: float = 0.0


class Tool(Protocol):
    """What the agent loop calls: the stateless python tool, or a rollout's jupyter tool."""

    settings: "ToolSettings"

    async def run(self, call: ParsedCall) -> tuple[str, ToolCallRecord]:
        """Response text and record for one call; raises ``ServiceError`` on infra failure."""
        ...


class CodeExecutor(Protocol):
    """What runs code: :class:`gateway.client.CodepoolClient` in practice."""

    async def execute(self, item: ExecuteItem) -> ExecuteResult:
        """Runs one call; raises ``ServiceError`` when there is no verdict."""
        ...


@dataclass(frozen=True)
class ToolSettings:
    """How calls are sent and how their output is shown."""

    tool_names: tuple[str, ...] = DEFAULT_TOOL_NAMES
    timeout_s: float | None = None
    memory_mb: int | None = None
    max_output_chars: int = 2048
    echo_last_expr: bool = True


_SUFFIX = {
    CallOutcome.TIMEOUT: "TimeoutError: the code ran past its time limit",
    CallOutcome.MEMORY_LIMIT: "MemoryError: the code ran past its memory limit",
    CallOutcome.OUTPUT_LIMIT: "OutputLimitError: the code wrote too much output",
}


class PythonTool:
    """Turns parsed calls into service calls and results into tool-response text."""

    def __init__(self, executor: CodeExecutor, settings: ToolSettings | None = None) -> None:
        self.executor = executor
        self.settings = settings or ToolSettings()

    async def run(self, call: ParsedCall) -> tuple[str, ToolCallRecord]:
        """Response text and record for one call; raises ``ServiceError`` on infra failure."""
        if not isinstance(call, CodeCall):
            return call.message, ToolCallRecord(CallOutcome.INVALID_CALL)
        started_s = time.perf_counter()
        result = await self.executor.execute(self._item(call))
        latency_s = time.perf_counter() - started_s
        outcome = outcome_of(result)
        record = ToolCallRecord(outcome, latency_s, result.wall_s, result.queue_s)
        return render_result(result, outcome, self.settings.max_output_chars), record

    def _item(self, call: CodeCall) -> ExecuteItem:
        return ExecuteItem(
            code=call.code,
            stdin=call.stdin,
            timeout_s=self.settings.timeout_s,
            memory_mb=self.settings.memory_mb,
            echo_last_expr=self.settings.echo_last_expr,
        )


def outcome_of(result: ExecuteResult) -> CallOutcome:
    """The policy-facing outcome of a service result; infrastructure statuses raise."""
    if result.status in NO_VERDICT_STATUSES:
        raise ServiceError(f"no verdict for the call: status {result.status}")
    return CallOutcome(result.status)


def render_result(result: ExecuteResult, outcome: CallOutcome, max_chars: int) -> str:
    """What the model reads: output, traceback, or a note on the limit that stopped the code."""
    parts = [result.stdout.rstrip("\n")]
    if outcome is not CallOutcome.OK:
        parts.append(result.stderr.rstrip("\n"))
    if outcome in _SUFFIX:
        parts.append(_SUFFIX[outcome])
    elif outcome is CallOutcome.KILLED:
        parts.append(f"Killed: the code was stopped by signal {result.signal or 'unknown'}")
    text = "\n".join(part for part in parts if part)
    return truncate_middle(text or "(no output)", max_chars)
