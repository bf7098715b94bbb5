"""Where rollout wall time goes when generation and tool calls overlap.

At each instant the clock is in one state: ``generate`` while a generation batch runs,
else ``service`` while at least one tool call is in flight, else ``other`` (parsing,
tokenizing, waiting to batch). The shares answer "is the trainer waiting on the service?".
"""

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Literal

Activity = Literal["generate", "service"]
STATES = ("generate", "service", "other")


@dataclass
class ActivityClock:
    """Accumulates seconds per state; spans of the same activity may nest or overlap."""

    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(STATES, 0.0))
    _active: dict[str, int] = field(default_factory=lambda: {"generate": 0, "service": 0})
    _since_s: float | None = None

    def start(self) -> None:
        """Starts counting (``other`` until a span opens)."""
        self._since_s = time.perf_counter()

    def stop(self) -> None:
        """Stops counting; the seconds so far stay."""
        self._advance()
        self._since_s = None

    @contextmanager
    def span(self, activity: Activity) -> Iterator[None]:
        """Marks ``activity`` as in progress for the duration of the block."""
        self._advance()
        self._active[activity] += 1
        try:
            yield
        finally:
            self._advance()
            self._active[activity] -= 1

    def shares(self) -> dict[str, float]:
        """Fraction of counted time per state (zeros when nothing was counted)."""
        total_s = sum(self.seconds.values())
        return {k: (v / total_s if total_s > 0 else 0.0) for k, v in self.seconds.items()}

    def _advance(self) -> None:
        if self._since_s is None:
            return
        now_s = time.perf_counter()
        self.seconds[self._state()] += now_s - self._since_s
        self._since_s = now_s

    def _state(self) -> str:
        if self._active["generate"]:
            return "generate"
        return "service" if self._active["service"] else "other"
