"""The client and the agent loop against a real ``codepool serve`` (started by a fixture)."""

import asyncio

import pytest

from codepool.bench.local_service import free_port
from gateway.client import ClientSettings, CodepoolClient, ExecuteItem, ServiceError
from tests.trainer.core.scripted import EOS, CharTokenizer, ScriptedGenerator
from trainer.core.agent_loop import AgentLoop, LoopLimits
from trainer.core.chat import ChatFormat
from trainer.core.tools import CallOutcome, PythonTool, ToolSettings
from trainer.core.trajectory import Finish

# The first test also waits for the session's ``codepool serve`` to come up.
pytestmark = pytest.mark.timeout(600)
TOK = CharTokenizer()

ANSWER = "<answer>\\boxed{42}</answer>"


def call(code: str, stdin: str | None = None) -> str:
    import json

    arguments = {"code": code} if stdin is None else {"code": code, "input": stdin}
    return "<tool_call>" + json.dumps({"name": "python", "arguments": arguments}) + "</tool_call>"


async def test_many_concurrent_calls_come_back_in_order_in_few_requests(codepool_url: str) -> None:
    async with CodepoolClient(ClientSettings(codepool_url)) as client:
        results = await client.execute_many([ExecuteItem(f"print({i}*{i})") for i in range(200)])
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(200)]
    assert {r.status for r in results} == {"ok"}
    assert client.stats.requests_sent < 20


async def test_the_loop_reads_real_outcomes_from_statuses(codepool_url: str) -> None:
    prompt = ChatFormat().prompt("Q: 6*7 =")
    turns = [
        call("prnt(6*7)") + call("while True: pass") + call("6*7"),
        call("print(int(input()) * 7)", stdin="6"),
        ANSWER,
    ]
    generator = ScriptedGenerator({prompt: turns})
    async with CodepoolClient(ClientSettings(codepool_url)) as client:
        tool = PythonTool(client, ToolSettings(timeout_s=1.0))
        loop = AgentLoop(generator, tool, TOK, LoopLimits(max_turns=4, max_response_tokens=8000))
        trajectory = await loop.run(TOK.encode(prompt))

    outcomes = [c.outcome for c in trajectory.tool_calls]
    assert outcomes == [CallOutcome.ERROR, CallOutcome.TIMEOUT, CallOutcome.OK, CallOutcome.OK]
    text = TOK.decode(trajectory.response_ids)
    assert "NameError: name 'prnt' is not defined" in text
    assert "TimeoutError" in text
    assert "<tool_response>\n42\n</tool_response>" in text  # the last expression, echoed
    assert text.count("<tool_response>\n42\n</tool_response>") == 2  # and the stdin one
    assert trajectory.finish is Finish.DONE
    assert all(c.latency_s > 0 for c in trajectory.tool_calls)
    pairs = zip(trajectory.response_ids, trajectory.loss_mask, strict=True)
    model_tokens = [token for token, trained in pairs if trained]
    assert TOK.decode(model_tokens) == "".join(t + EOS for t in turns)


async def test_an_unreachable_service_fails_the_rollout_not_the_policy() -> None:
    settings = ClientSettings(f"http://127.0.0.1:{free_port()}", max_attempts=2,
                              backoff_initial_s=0.01)  # fmt: skip
    prompt = ChatFormat().prompt("Q")
    generator = ScriptedGenerator({prompt: [call("print(1)"), ANSWER]})
    async with CodepoolClient(settings) as client:
        with pytest.raises(ServiceError):
            await client.execute(ExecuteItem("print(1)"))
        loop = AgentLoop(generator, PythonTool(client), TOK, LoopLimits())
        trajectory = await asyncio.wait_for(loop.run(TOK.encode(prompt)), 30)
    assert trajectory.finish is Finish.SERVICE_FAILED
    assert not trajectory.usable
    assert "<tool_response>" not in TOK.decode(trajectory.response_ids)
