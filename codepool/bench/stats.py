"""Latency statistics shared by the benchmarks."""

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Measurement:
    """Throughput and latency of one measured workload."""

    label: str
    calls: int
    wall_s: float
    latencies_s: list[float]
    errors: int = 0

    def pooled(self, other: "Measurement") -> "Measurement":
        """This measurement and ``other`` (of the same workload) as one: calls and time add."""
        return Measurement(
            self.label, self.calls + other.calls, self.wall_s + other.wall_s,
            self.latencies_s + other.latencies_s, self.errors + other.errors,
        )  # fmt: skip

    @property
    def calls_per_s(self) -> float:
        """Completed calls per second of wall time."""
        return self.calls / self.wall_s if self.wall_s > 0 else 0.0

    def percentile_ms(self, q: float) -> float:
        """The q-th percentile latency (0 < q < 100) in milliseconds."""
        if not self.latencies_s:
            return float("nan")
        if len(self.latencies_s) == 1:
            return self.latencies_s[0] * 1000
        cuts = statistics.quantiles(self.latencies_s, n=100, method="inclusive")
        return cuts[min(98, max(0, round(q) - 1))] * 1000
