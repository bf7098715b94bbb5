"""The stateful (jupyter) tool against a real ``codepool serve``: state, forks, restarts."""

import pytest

from gateway.session_client import SessionClient, SessionClientSettings, SessionEnded
from trainer.core.jupyter import RESTARTED, open_group
from trainer.core.tool_calls import CodeCall, InvalidCall
from trainer.core.tools import CallOutcome, ToolSettings


@pytest.fixture
async def sessions(codepool_url: str) -> SessionClient:
    return SessionClient(SessionClientSettings(codepool_url, timeout_s=2))


async def test_a_group_forks_from_shared_setup_and_keeps_state(sessions: SessionClient) -> None:
    async with sessions:
        tools = await open_group(sessions, 3, ToolSettings(), setup_code="base = 10")
        assert len({tool.session_id for tool in tools}) == 3
        first = [await tool.run(CodeCall(f"base += {i}\nbase")) for i, tool in enumerate(tools)]
        assert [text for text, _ in first] == ["10", "11", "12"]
        assert all(record.outcome == CallOutcome.OK for _, record in first)
        again = [await tool.run(CodeCall("base * 2")) for tool in tools]
        assert [text for text, _ in again] == ["20", "22", "24"]
        for tool in tools:
            await tool.close()
        with pytest.raises(SessionEnded):
            await sessions.execute(tools[0].session_id, "base")


async def test_a_cell_that_ends_the_session_restarts_it(sessions: SessionClient) -> None:
    async with sessions:
        (tool,) = await open_group(sessions, 1, ToolSettings(timeout_s=1))
        await tool.run(CodeCall("kept = 1"))
        text, record = await tool.run(CodeCall("while True: pass"))
        assert record.outcome == CallOutcome.TIMEOUT and RESTARTED in text
        assert tool.restarted
        after, after_record = await tool.run(CodeCall("kept"))
        assert after_record.outcome == CallOutcome.ERROR and "NameError" in after
        invalid, invalid_record = await tool.run(InvalidCall("bad json"))
        assert (invalid, invalid_record.outcome) == ("bad json", CallOutcome.INVALID_CALL)
        await tool.close()
