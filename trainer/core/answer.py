"""Reading the final answer: ``<answer>...\\boxed{N}...</answer>``, and counting answer tags."""

import re
from dataclasses import dataclass
from typing import Literal

ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"
BOX = "\\boxed{"
_ANSWER_RE = re.compile(re.escape(ANSWER_OPEN) + r"(.*?)" + re.escape(ANSWER_CLOSE), re.DOTALL)
Strictness = Literal["strict", "lenient"]


@dataclass(frozen=True)
class AnswerTags:
    """How the model used answer tags in one rollout."""

    opened: int  # "<answer>" occurrences: each one is an answer attempt
    closed_blocks: int  # complete "<answer>...</answer>" blocks


def count_answer_tags(text: str) -> AnswerTags:
    """Answer-tag counts of the model's text (tool responses excluded by the caller)."""
    return AnswerTags(text.count(ANSWER_OPEN), len(_ANSWER_RE.findall(text)))


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` with balanced braces, or None."""
    start = text.rfind(BOX)
    while start != -1:
        content = _balanced(text, start + len(BOX))
        if content is not None:
            return content
        start = text.rfind(BOX, 0, start)
    return None


def _balanced(text: str, begin: int) -> str | None:
    depth = 1
    for index in range(begin, len(text)):
        if text[index] == "{":
            depth += 1
        elif text[index] == "}":
            depth -= 1
            if depth == 0:
                return text[begin:index]
    return None


def extract_answer(text: str, strictness: Strictness = "strict") -> str | None:
    """The answer to grade. strict: last box in the last answer block; lenient: last box."""
    if strictness == "lenient":
        return last_boxed(text)
    blocks = _ANSWER_RE.findall(text)
    return last_boxed(blocks[-1]) if blocks else None
