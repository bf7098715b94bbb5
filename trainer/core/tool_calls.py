"""Tool calls as the model writes them: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``.

Parsing never raises: a malformed call becomes an :class:`InvalidCall` whose message is shown
to the model as the tool response (the report returns the parse error the same way).
"""

import json
import re
from collections.abc import Collection
from dataclasses import dataclass

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
_CALL_RE = re.compile(re.escape(OPEN_TAG) + r"(.*?)" + re.escape(CLOSE_TAG), re.DOTALL)
DEFAULT_TOOL_NAMES = ("python", "execute_python_code_with_standard_io")


@dataclass(frozen=True)
class CodeCall:
    """A well-formed call of the python tool."""

    code: str
    stdin: str = ""


@dataclass(frozen=True)
class InvalidCall:
    """A call that cannot run; ``message`` says why, for the model to read."""

    message: str


ParsedCall = CodeCall | InvalidCall


def parse_tool_calls(
    text: str, tool_names: Collection[str] = DEFAULT_TOOL_NAMES
) -> list[ParsedCall]:
    """Every tool call in one model turn, in order; an unclosed last call is invalid."""
    calls: list[ParsedCall] = []
    end = 0
    for match in _CALL_RE.finditer(text):
        calls.append(parse_call_body(match.group(1), tool_names))
        end = match.end()
    if OPEN_TAG in text[end:]:
        calls.append(InvalidCall(f"invalid tool call: {OPEN_TAG} without {CLOSE_TAG}"))
    return calls


def parse_call_body(body: str, tool_names: Collection[str]) -> ParsedCall:
    """One call's JSON body to a :class:`CodeCall`, or the reason it is invalid."""
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return InvalidCall(f"invalid tool call: the JSON does not parse ({exc})")
    if not isinstance(call, dict):
        return InvalidCall('invalid tool call: expected {"name": ..., "arguments": {...}}')
    name = call.get("name")
    if name not in tool_names:
        return InvalidCall(f"unknown tool {name!r}; available: {', '.join(tool_names)}")
    return _code_call(call.get("arguments"))


def _code_call(arguments: object) -> ParsedCall:
    if isinstance(arguments, str):  # some models double-encode the arguments
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return InvalidCall(f"invalid tool call: arguments do not parse ({exc})")
    if not isinstance(arguments, dict):
        return InvalidCall("invalid tool call: arguments must be an object")
    code = arguments.get("code")
    if not isinstance(code, str) or not code.strip():
        return InvalidCall('invalid tool call: arguments need a non-empty string "code"')
    stdin = arguments.get("input", arguments.get("stdin", ""))
    if stdin is None:
        stdin = ""
    if not isinstance(stdin, str):
        return InvalidCall('invalid tool call: "input" must be a string')
    return CodeCall(code=code, stdin=stdin)


def truncate_middle(text: str, max_chars: int) -> str:
    """Keeps the first and last ``max_chars // 2`` characters with a marker between them."""
    if len(text) <= max_chars:
        return text
    head_chars = max_chars // 2
    tail_chars = max_chars - head_chars
    dropped = len(text) - head_chars - tail_chars
    tail = text[len(text) - tail_chars :] if tail_chars else ""
    return f"{text[:head_chars]}\n[... {dropped} characters truncated ...]\n{tail}"
