"""Fixtures for the deployment check: a private copy of k8s/ and deploy/ to break on purpose."""

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from deploy.check.__main__ import main

REPO = Path(__file__).resolve().parents[2]

Break = Callable[[str, str, str], None]
Check = Callable[..., tuple[int, str]]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the deployment tree; edits to it leave the repository alone."""
    for part in ("k8s", "deploy"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture
def break_file(tree: Path) -> Break:
    """Replaces text in one file of the copy; fails if the text is not there (no silent no-op)."""

    def edit(path: str, old: str, new: str) -> None:
        file = tree / path
        text = file.read_text()
        assert text.count(old) == 1, f"{old!r} is not exactly once in {path}"
        file.write_text(text.replace(old, new))

    return edit


@pytest.fixture
def check(tree: Path, capsys: pytest.CaptureFixture[str]) -> Check:
    """Runs the check on the copy in-process; returns its exit status and report."""

    def run(*steps: str, targets: tuple[str, ...] = ("base",)) -> tuple[int, str]:
        rc = main(["--root", str(tree), "--only", *steps, "--targets", *targets])
        return rc, capsys.readouterr().out

    return run
