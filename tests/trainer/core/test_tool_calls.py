"""Parsing tool calls and truncating what the model reads."""

from trainer.core.tool_calls import CodeCall, InvalidCall, parse_tool_calls, truncate_middle


def test_parses_every_call_with_optional_input() -> None:
    text = (
        'thinking <tool_call>{"name": "python", "arguments": {"code": "print(1)"}}</tool_call>'
        '<tool_call>\n{"name": "execute_python_code_with_standard_io",'
        ' "arguments": {"code": "print(input())", "input": "7"}}\n</tool_call>'
    )
    assert parse_tool_calls(text) == [CodeCall("print(1)"), CodeCall("print(input())", "7")]


def test_double_encoded_arguments_are_accepted() -> None:
    text = '<tool_call>{"name": "python", "arguments": "{\\"code\\": \\"1+1\\"}"}</tool_call>'
    assert parse_tool_calls(text) == [CodeCall("1+1")]


def test_no_call_is_no_call() -> None:
    assert parse_tool_calls("<answer>\\boxed{3}</answer>") == []


def test_invalid_calls_say_why() -> None:
    calls = parse_tool_calls(
        "<tool_call>[1, 2]</tool_call>"
        '<tool_call>{"name": "python", "arguments": {"code": "x", "input": 3}}</tool_call>'
        '<tool_call>{"name": "python", "arguments": 5}</tool_call>'
    )
    assert all(isinstance(c, InvalidCall) for c in calls)
    messages = [c.message for c in calls if isinstance(c, InvalidCall)]
    assert "expected" in messages[0]
    assert '"input" must be a string' in messages[1]
    assert "must be an object" in messages[2]


def test_tool_names_are_configurable() -> None:
    text = '<tool_call>{"name": "run", "arguments": {"code": "1"}}</tool_call>'
    assert parse_tool_calls(text, ("run",)) == [CodeCall("1")]
    assert isinstance(parse_tool_calls(text)[0], InvalidCall)


def test_truncate_middle_keeps_head_and_tail() -> None:
    assert truncate_middle("abcdef", 6) == "abcdef"
    assert truncate_middle("abcdefghij", 4) == "ab\n[... 6 characters truncated ...]\nij"
    assert truncate_middle("abcdefghij", 5) == "ab\n[... 5 characters truncated ...]\nhij"
