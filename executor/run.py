"""Running one claimed job: skip it if it is late or cancelled, else run it in a slot."""

import time

from executor.jobs import Execution, JobResult, QueuedJob, Status
from executor.limits import JobLimits, SandboxJob
from executor.pool import SlotPool
from executor.settings import SandboxSettings


def skipped(job: QueuedJob, status: Status, message: str, queue_s: float) -> JobResult:
    """A result for a job that did not run: its stderr says why."""
    return JobResult(id=job.id, status=status, stderr=f"codepool: {message}", queue_s=queue_s)


def verdict_before_start(job: QueuedJob, cancelled: bool, now_s: float) -> JobResult | None:
    """The answer for a job that must not run (cancelled, or too late to finish in time)."""
    queue_s = max(0.0, now_s - job.enqueued_at_s)
    if cancelled:
        return skipped(job, Status.CANCELLED, "the batch was cancelled before this job started",
                       queue_s)  # fmt: skip
    if now_s > job.start_by_s:
        message = "the job's deadline left no time to run it; safe to retry"
        return skipped(job, Status.NOT_STARTED, message, queue_s)
    return None


async def execute(
    job: QueuedJob, cancelled: bool, pool: SlotPool, settings: SandboxSettings
) -> JobResult:
    """The job's result; never raises for the workload's failures."""
    now_s = time.time()
    early = verdict_before_start(job, cancelled, now_s)
    if early is not None:
        return early
    limits = JobLimits.resolve(settings, timeout_s=job.timeout_s, memory_mb=job.memory_mb)
    sandbox_job = SandboxJob(job.code, limits, job.stdin, job.files, job.echo_last_expr)
    execution: Execution = await pool.run(sandbox_job)
    return JobResult(**execution.model_dump(), id=job.id, queue_s=now_s - job.enqueued_at_s)
