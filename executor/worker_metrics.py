"""Prometheus metrics of one worker process, on a registry of its own (made at start)."""

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# 1 ms to 30 s: the shortest jobs to the longest allowed.
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30)
START_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)


def build_version() -> str:
    """The installed codepool version."""
    try:
        return version("codepool")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class WorkerMetrics:
    """Every metric a worker exposes."""

    registry: CollectorRegistry
    jobs: Counter
    slots_busy: Gauge
    slots_idle: Gauge
    sandbox_start_seconds: Histogram
    execution_seconds: Histogram
    reclaimed: Counter
    dead_lettered: Counter

    @classmethod
    def create(cls, busy: Callable[[], float], idle: Callable[[], float]) -> "WorkerMetrics":
        """A fresh registry; the slot gauges read ``busy`` and ``idle`` at scrape time."""
        registry = CollectorRegistry()
        metrics = cls(
            registry=registry,
            jobs=Counter("codepool_worker_jobs", "Jobs finished by this worker, by status",
                         ["status"], registry=registry),
            slots_busy=Gauge("codepool_worker_slots_busy", "Slots running a job",
                             registry=registry),
            slots_idle=Gauge("codepool_worker_slots_idle", "Slots free for a job",
                             registry=registry),
            sandbox_start_seconds=Histogram(
                "codepool_sandbox_start_seconds", "Time to start a sandbox slot (jail + zygote)",
                buckets=START_BUCKETS, registry=registry),
            execution_seconds=Histogram(
                "codepool_worker_execution_seconds", "Wall time of each job in its slot",
                buckets=SECONDS_BUCKETS, registry=registry),
            reclaimed=Counter("codepool_jobs_reclaimed", "Jobs taken over from dead workers",
                              registry=registry),
            dead_lettered=Counter("codepool_jobs_dead_lettered", "Jobs given up on",
                                  registry=registry),
        )  # fmt: skip
        metrics.slots_busy.set_function(busy)
        metrics.slots_idle.set_function(idle)
        info = Gauge("codepool_build_info", "Build of this process", ["version"], registry=registry)
        info.labels(version=build_version()).set(1)
        return metrics
