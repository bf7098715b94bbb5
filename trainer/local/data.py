"""Prompts from a JSONL dataset, in an order fixed by (seed, step) so a resumed run continues."""

import json
import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Problem:
    """A question and its reference answer."""

    prompt: str
    answer: str
    setup: str = ""
    """Code a stateful (jupyter) tool runs once per prompt before its rollouts fork."""


def load_problems(path: Path) -> list[Problem]:
    """Every ``{"prompt", "answer"}`` line of a JSONL file; raises ValueError on a bad line."""
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            setup = str(item.get("setup") or "")
            problems.append(Problem(str(item["prompt"]), str(item["answer"]), setup))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}:{number}: expected {{'prompt', 'answer'}}: {exc}") from exc
    if not problems:
        raise ValueError(f"{path}: no problems")
    return problems


def problems_for_step(problems: list[Problem], step: int, count: int, seed: int) -> list[Problem]:
    """The ``count`` problems of ``step``: consecutive slices of per-epoch shuffles."""
    chosen = []
    for position in range(step * count, (step + 1) * count):
        epoch, index = divmod(position, len(problems))
        order = list(range(len(problems)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        chosen.append(problems[order[index]])
    return chosen
