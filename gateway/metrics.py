"""Gateway metrics on a registry of the app's own, and the HTTP middleware that feeds them."""

import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from executor.jobs import Status
from gateway.pending import Reply

# 1 ms to 30 s, as the workers' histograms (the dashboard compares them).
SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30)


def build_version() -> str:
    """The installed codepool version."""
    try:
        return version("codepool")
    except PackageNotFoundError:
        return "unknown"


@dataclass(frozen=True)
class GatewayMetrics:
    """Every metric the gateway exposes at ``/metrics``."""

    registry: CollectorRegistry
    http_requests: Counter
    http_duration: Histogram
    jobs: Counter
    queue_wait: Histogram
    execution: Histogram
    end_to_end: Histogram
    queue_depth: Gauge
    queue_pending: Gauge
    rejections: Counter
    duplicates: Counter

    @classmethod
    def create(cls) -> "GatewayMetrics":
        """A fresh registry (one per app)."""
        r = CollectorRegistry()
        metrics = cls(
            registry=r,
            http_requests=Counter("codepool_http_requests", "HTTP requests",
                                  ["route", "method", "code"], registry=r),
            http_duration=Histogram("codepool_http_request_duration_seconds",
                                    "HTTP request duration", ["route"],
                                    buckets=SECONDS_BUCKETS, registry=r),
            jobs=Counter("codepool_jobs", "Jobs answered, by status", ["status"], registry=r),
            queue_wait=Histogram("codepool_job_queue_wait_seconds", "Enqueue to start",
                                 buckets=SECONDS_BUCKETS, registry=r),
            execution=Histogram("codepool_job_execution_seconds", "Run time in the sandbox",
                                buckets=SECONDS_BUCKETS, registry=r),
            end_to_end=Histogram("codepool_job_end_to_end_seconds", "Admission to answer",
                                 buckets=SECONDS_BUCKETS, registry=r),
            queue_depth=Gauge("codepool_queue_depth", "Jobs not yet claimed by a worker",
                              registry=r),
            queue_pending=Gauge("codepool_queue_pending", "Jobs claimed, not yet answered",
                                registry=r),
            rejections=Counter("codepool_rejections", "Requests refused, by reason",
                               ["reason"], registry=r),
            duplicates=Counter("codepool_duplicate_results",
                               "Results dropped: a re-run's, or nobody waited", registry=r),
        )  # fmt: skip
        Gauge("codepool_build_info", "Build of this process", ["version"], registry=r).labels(
            version=build_version()
        ).set(1)
        return metrics

    def observe(self, reply: Reply, end_to_end_s: float) -> None:
        """Counts one answered job; worker-made results also give queue and run times."""
        self.jobs.labels(status=reply.status.value).inc()
        self.end_to_end.observe(end_to_end_s)
        if reply.status in (Status.NOT_STARTED, Status.CANCELLED):
            return
        data = reply.as_dict()
        self.queue_wait.observe(float(data.get("queue_s") or 0.0))  # type: ignore[arg-type]
        self.execution.observe(float(data.get("wall_s") or 0.0))  # type: ignore[arg-type]


class HttpMetricsMiddleware:
    """Counts requests by route template (not raw path: bounded label values) and code."""

    def __init__(self, app: ASGIApp, metrics: GatewayMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500

        async def send_and_record(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_record)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            self.metrics.http_requests.labels(route=name, method=scope["method"],
                                              code=str(code)).inc()  # fmt: skip
            self.metrics.http_duration.labels(route=name).observe(time.perf_counter() - started)
