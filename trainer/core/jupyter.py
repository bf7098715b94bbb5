"""The stateful python tool: each rollout's calls run in one live session (a notebook).

Variables and functions survive from one call to the next, as in the Jupyter-style tool
agentic math models use, without re-running earlier cells. A group of rollouts of one prompt
branches from one session by fork: shared setup (``setup_code``) runs once, then each rollout
gets its own copy of that state.
"""

import time
from dataclasses import dataclass

from gateway.client import ServiceError
from gateway.session_client import SessionClient, SessionEnded
from trainer.core.tool_calls import CodeCall, ParsedCall
from trainer.core.tools import CallOutcome, ToolCallRecord, ToolSettings, outcome_of, render_result

RESTARTED = (
    "KernelRestarted: the previous cell ended the interpreter (time, memory or output limit); "
    "earlier variables are gone"
)


@dataclass
class JupyterTool:
    """One rollout's tool: calls run in ``session_id``; a new session replaces a killed one."""

    sessions: SessionClient
    session_id: str
    settings: ToolSettings
    restarted: bool = False

    async def run(self, call: ParsedCall) -> tuple[str, ToolCallRecord]:
        """Response text and record for one call; raises ``ServiceError`` on infra failure."""
        if not isinstance(call, CodeCall):
            return call.message, ToolCallRecord(CallOutcome.INVALID_CALL)
        started_s = time.perf_counter()
        try:
            result, state = await self.sessions.execute(
                self.session_id, call.code, call.stdin, self.settings.timeout_s
            )
        except SessionEnded:  # expired between turns, or killed by an earlier cell
            await self._restart()
            return RESTARTED, ToolCallRecord(CallOutcome.ERROR, time.perf_counter() - started_s)
        latency_s = time.perf_counter() - started_s
        outcome = outcome_of(result)
        text = render_result(result, outcome, self.settings.max_output_chars)
        if state != "alive":
            await self._restart()
            text = f"{text}\n{RESTARTED}"
        return text, ToolCallRecord(outcome, latency_s, result.wall_s, result.queue_s)

    async def close(self) -> None:
        """Ends the rollout's session."""
        await self.sessions.close(self.session_id)

    async def _restart(self) -> None:
        self.session_id = await self.sessions.create()
        self.restarted = True


async def open_group(
    sessions: SessionClient, n: int, settings: ToolSettings, setup_code: str = ""
) -> list[JupyterTool]:
    """``n`` tools whose sessions are copies of one, after ``setup_code`` ran in it once."""
    root = await sessions.create()
    try:
        if setup_code:
            result, state = await sessions.execute(root, setup_code)
            if result.status != "ok" or state != "alive":
                raise ServiceError(f"the group's setup code failed: {result.stderr[-300:]}")
        copies = await sessions.fork(root, n)
    finally:
        await sessions.close(root)
    return [JupyterTool(sessions, copy, settings) for copy in copies]
