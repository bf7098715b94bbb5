"""The toy task: multiply two 2-digit numbers. Calling the tool is the only reliable way.

Three demonstrated behaviours seed the warm start: a direct guess (almost always wrong), clean
tool use, and a ``prnt(`` call that fails with a NameError followed by a corrected call.
"""

import json
import random
from pathlib import Path
from typing import Literal

from gateway.client import ExecuteResult
from trainer.core.chat import ChatFormat
from trainer.core.tools import CallOutcome, render_result
from trainer.toy.tokenizer import CALL_HEAD, CALL_TAIL, IM_END

Behaviour = Literal["direct", "tool", "fix"]
Segment = tuple[str, bool]  # text, trained on
OPERAND_RANGE = (10, 99)
# What the sandbox prints for the misspelt call (captured from a real slot).
NAME_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "<code>", line 1, in <module>\n'
    "    prnt({a}*{b})\n"
    "     ^^^^\n"
    "NameError: name 'prnt' is not defined\n"
)


def question(a: int, b: int) -> str:
    """The user's text for ``a * b``."""
    return f"Q:{a}*{b}="


def tool_call(function: str, a: int, b: int) -> str:
    """The model's call of ``function(a*b)`` (``print`` or the misspelt ``prnt``)."""
    return f"<tool_call>{CALL_HEAD}{function}({a}*{b}){CALL_TAIL}</tool_call>"


def final_answer(value: int) -> str:
    """The answer format the reward reads."""
    return f"<answer>\\boxed{{{value}}}</answer>"


def demonstration(a: int, b: int, behaviour: Behaviour, rng: random.Random) -> list[Segment]:
    """One warm-start conversation as (text, trained) segments; tool responses untrained."""
    chat = ChatFormat()
    product = a * b
    ok = ExecuteResult(id="", status="ok", exit_code=0, stdout=f"{product}\n")
    failed = ExecuteResult(id="", status="error", exit_code=1, stderr=NAME_ERROR.format(a=a, b=b))
    segments: list[Segment] = [(chat.prompt(question(a, b)), False)]
    if behaviour == "direct":
        guess = rng.randint(OPERAND_RANGE[0] ** 2, OPERAND_RANGE[1] ** 2)
        return [*segments, (final_answer(guess) + IM_END, True)]
    if behaviour == "fix":
        segments.append((tool_call("prnt", a, b) + IM_END, True))
        segments.append((chat.tool_turn([render_result(failed, CallOutcome.ERROR, 2048)]), False))
    segments.append((tool_call("print", a, b) + IM_END, True))
    segments.append((chat.tool_turn([render_result(ok, CallOutcome.OK, 2048)]), False))
    return [*segments, (final_answer(product) + IM_END, True)]


def random_operands(rng: random.Random) -> tuple[int, int]:
    """Two operands from the task's range."""
    return rng.randint(*OPERAND_RANGE), rng.randint(*OPERAND_RANGE)


def write_dataset(path: Path, count: int, seed: int) -> Path:
    """A JSONL file of ``{"prompt", "answer"}`` lines for ``codepool train``."""
    rng = random.Random(seed)
    lines = []
    for _ in range(count):
        a, b = random_operands(rng)
        lines.append(json.dumps({"prompt": question(a, b), "answer": str(a * b)}))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path
