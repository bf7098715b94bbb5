"""Run outputs: metrics as JSONL lines and a rich progress display."""

import json
import time
from pathlib import Path
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

SHOWN = {
    "rollout/reward_mean": "reward",
    "tool/error_ratio_in_correct": "err|correct",
    "tool/calls_per_rollout": "calls",
    "loss/entropy": "entropy",
}


class MetricsLog:
    """Appends one JSON object per step to ``metrics.jsonl``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = path.open("a", encoding="utf-8")

    def write(self, step: int, metrics: dict[str, float]) -> None:
        """Writes and flushes one step's metrics."""
        line = {"step": step, "unix_time_s": round(time.time(), 3), **metrics}
        self._file.write(json.dumps(line) + "\n")
        self._file.flush()

    def close(self) -> None:
        """Closes the file."""
        self._file.close()


def read_metrics(path: Path) -> list[dict[str, float]]:
    """Every line of a ``metrics.jsonl``."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ProgressView:
    """A progress bar with the step's headline metrics; silent when disabled."""

    def __init__(self, total_steps: int, first_step: int, enabled: bool) -> None:
        self._progress = Progress(
            TextColumn("[bold]train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[summary]}"),
            console=Console(stderr=True), disable=not enabled, transient=False,
        )  # fmt: skip
        self._task = self._progress.add_task(
            "train", total=total_steps, completed=first_step, summary=""
        )

    def __enter__(self) -> "ProgressView":
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def advance(self, metrics: dict[str, float]) -> None:
        """Moves one step on and shows its metrics."""
        summary = "  ".join(f"{name} {metrics.get(key, 0.0):.3f}" for key, name in SHOWN.items())
        self._progress.update(self._task, advance=1, summary=summary)
