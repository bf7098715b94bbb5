"""Prompt order: every problem once per epoch, fixed by (seed, step)."""

from collections import Counter
from pathlib import Path

import pytest

from trainer.local.data import Problem, load_problems, problems_for_step


def test_each_epoch_visits_every_problem_once() -> None:
    problems = [Problem(str(i), str(i)) for i in range(10)]
    seen = Counter(p.prompt for step in range(5) for p in problems_for_step(problems, step, 4, 1))
    assert seen == dict.fromkeys(seen, 2) and len(seen) == 10  # 20 draws = 2 epochs
    assert problems_for_step(problems, 3, 4, 1) == problems_for_step(problems, 3, 4, 1)
    assert problems_for_step(problems, 0, 4, 1) != problems_for_step(problems, 0, 4, 2)


def test_load_rejects_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "Q", "answer": 3}\n\n')
    assert load_problems(path) == [Problem("Q", "3")]
    path.write_text('{"prompt": "Q"}\n')
    with pytest.raises(ValueError, match=":1:"):
        load_problems(path)
