"""The agent loop with a scripted generator and executor: masks, stops, failures, concurrency."""

import asyncio

import pytest

from gateway.client import ExecuteResult
from tests.trainer.core.scripted import (
    EOS,
    CharTokenizer,
    ScriptedExecutor,
    ScriptedGenerator,
    ok,
)
from trainer.core.agent_loop import AgentLoop, Generation, GenerationRequest, LoopLimits
from trainer.core.chat import ChatFormat
from trainer.core.tools import CallOutcome, PythonTool
from trainer.core.trajectory import Finish

PROMPT = ChatFormat().prompt("Q: 6*7 =")
CALL = '<tool_call>{"name": "python", "arguments": {"code": "print(6*7)"}}</tool_call>'
ANSWER = "<answer>\\boxed{42}</answer>"
TOK = CharTokenizer()


def make_loop(
    turns: list[str], executor: ScriptedExecutor, limits: LoopLimits | None = None
) -> tuple[AgentLoop, ScriptedGenerator]:
    generator = ScriptedGenerator({PROMPT: turns})
    limits = limits or LoopLimits(max_turns=4, max_response_tokens=4000)
    return AgentLoop(generator, PythonTool(executor), TOK, limits), generator


async def test_tool_call_then_answer_masks_the_tool_response() -> None:
    executor = ScriptedExecutor({"print(6*7)": ok("42\n")})
    loop, generator = make_loop([CALL, ANSWER], executor)

    trajectory = await loop.run(TOK.encode(PROMPT))

    tool_text = ChatFormat().tool_turn(["42"])
    turn1, turn2 = TOK.encode(CALL + EOS), TOK.encode(ANSWER + EOS)
    assert trajectory.response_ids == turn1 + TOK.encode(tool_text) + turn2
    assert trajectory.loss_mask == [1] * len(turn1) + [0] * len(tool_text) + [1] * len(turn2)
    assert trajectory.finish is Finish.DONE
    assert trajectory.num_turns == 2
    assert [c.outcome for c in trajectory.tool_calls] == [CallOutcome.OK]
    assert "<tool_response>\n42\n</tool_response>" in tool_text
    assert generator.requests[1].context_ids == TOK.encode(PROMPT) + turn1 + TOK.encode(tool_text)
    assert executor.items[0].echo_last_expr is True


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("<tool_call>{not json}</tool_call>", "the JSON does not parse"),
        ('<tool_call>{"name": "bash", "arguments": {"code": "ls"}}</tool_call>', "unknown tool"),
        ('<tool_call>{"name": "python", "arguments": {}}</tool_call>', 'non-empty string "code"'),
        ('<tool_call>{"name": "python"', "without </tool_call>"),
    ],
)
async def test_malformed_calls_are_answered_without_the_service(call: str, message: str) -> None:
    executor = ScriptedExecutor({})
    loop, _ = make_loop([call, ANSWER], executor)

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert executor.items == []
    assert [c.outcome for c in trajectory.tool_calls] == [CallOutcome.INVALID_CALL]
    assert message in TOK.decode(trajectory.response_ids)
    assert trajectory.finish is Finish.DONE


async def test_execution_error_and_timeout_count_as_errors_from_status() -> None:
    error = ExecuteResult(id="e", status="error", exit_code=1, stderr="NameError: prnt\n")
    timeout = ExecuteResult(id="t", status="timeout", stdout="partial\n")
    executor = ScriptedExecutor({"prnt(1)": error, "while True: pass": timeout})
    call = '<tool_call>{"name": "python", "arguments": {"code": "%s"}}</tool_call>'
    loop, _ = make_loop([call % "prnt(1)" + call % "while True: pass", ANSWER], executor)

    trajectory = await loop.run(TOK.encode(PROMPT))

    outcomes = [c.outcome for c in trajectory.tool_calls]
    assert outcomes == [CallOutcome.ERROR, CallOutcome.TIMEOUT]
    assert trajectory.num_tool_errors == 2
    text = TOK.decode(trajectory.response_ids)
    assert "NameError: prnt" in text
    assert "partial\nTimeoutError" in text


async def test_ok_output_mentioning_error_is_not_an_error() -> None:
    executor = ScriptedExecutor({"print(6*7)": ok("no error here\n")})
    loop, _ = make_loop([CALL, ANSWER], executor)

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert trajectory.num_tool_errors == 0


async def test_turn_limit_runs_the_last_calls_but_appends_no_response() -> None:
    executor = ScriptedExecutor({"print(6*7)": ok("42\n")})
    loop, _ = make_loop([CALL, CALL, CALL], executor, LoopLimits(max_turns=2))

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert trajectory.finish is Finish.MAX_TURNS
    assert trajectory.num_turns == 2
    assert len(executor.items) == 2
    assert TOK.decode(trajectory.response_ids).endswith(CALL + EOS)
    assert trajectory.loss_mask[-1] == 1


async def test_turn_cut_by_the_token_budget_is_truncated() -> None:
    executor = ScriptedExecutor({})
    generator = ScriptedGenerator({PROMPT: [ANSWER]}, stop=False)
    limits = LoopLimits(max_turns=3, max_response_tokens=10)
    loop = AgentLoop(generator, PythonTool(executor), TOK, limits)

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert trajectory.finish is Finish.TRUNCATED
    assert len(trajectory.response_ids) == 10
    assert generator.requests[0].max_new_tokens == 10


async def test_tool_response_over_the_budget_truncates() -> None:
    executor = ScriptedExecutor({"print(6*7)": ok("4" * 500)})
    budget = len(CALL + EOS) + 100
    loop, _ = make_loop([CALL, ANSWER], executor, LoopLimits(max_response_tokens=budget))

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert trajectory.finish is Finish.TRUNCATED
    assert trajectory.response_ids == TOK.encode(CALL + EOS)


async def test_service_failure_flags_the_rollout_and_shows_nothing() -> None:
    executor = ScriptedExecutor({"print(6*7)": lambda: "gave up after 6 attempts"})
    loop, _ = make_loop([CALL, ANSWER], executor)

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert trajectory.finish is Finish.SERVICE_FAILED
    assert not trajectory.usable
    assert "gave up" in trajectory.service_problem
    assert "<tool_response>" not in TOK.decode(trajectory.response_ids)


async def test_calls_over_the_per_turn_limit_are_invalid() -> None:
    executor = ScriptedExecutor({"print(6*7)": ok("42\n")})
    limits = LoopLimits(max_calls_per_turn=1)
    loop, _ = make_loop([CALL + CALL, ANSWER], executor, limits)

    trajectory = await loop.run(TOK.encode(PROMPT))

    assert len(executor.items) == 1
    assert [c.outcome for c in trajectory.tool_calls] == [CallOutcome.OK, CallOutcome.INVALID_CALL]


async def test_tool_calls_are_sent_while_other_rollouts_still_generate() -> None:
    """Rollout B's first turn cannot finish until A's tool call has reached the service."""
    a_called = asyncio.Event()

    async def answer_a() -> ExecuteResult:
        a_called.set()
        return ok("42\n")

    executor = ScriptedExecutor({"print(6*7)": answer_a})
    prompt_b = ChatFormat().prompt("Q: 1*1 =")
    scripted = ScriptedGenerator({PROMPT: [CALL, ANSWER], prompt_b: [ANSWER]})

    class WaitingGenerator:
        async def generate(self, request: GenerationRequest) -> Generation:
            if TOK.decode(request.context_ids).startswith(prompt_b):
                await a_called.wait()
            return await scripted.generate(request)

    loop = AgentLoop(WaitingGenerator(), PythonTool(executor), TOK, LoopLimits())
    a, b = await asyncio.wait_for(
        asyncio.gather(loop.run(TOK.encode(PROMPT)), loop.run(TOK.encode(prompt_b))), 5
    )
    assert a.finish is Finish.DONE and b.finish is Finish.DONE


async def test_calls_of_one_turn_run_concurrently() -> None:
    both_arrived = asyncio.Barrier(2)

    async def answer() -> ExecuteResult:
        await both_arrived.wait()
        return ok("1\n")

    executor = ScriptedExecutor({"print(6*7)": answer})
    loop, _ = make_loop([CALL + CALL, ANSWER], executor)

    trajectory = await asyncio.wait_for(loop.run(TOK.encode(PROMPT)), 5)

    assert [c.outcome for c in trajectory.tool_calls] == [CallOutcome.OK, CallOutcome.OK]
