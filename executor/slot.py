"""A slot: one long-lived nsjail process running a zygote, serving one job at a time."""

import asyncio
import logging
import time

from executor import framing
from executor.jail_process import JailProcess, SlotConfig
from executor.jobs import Execution
from executor.limits import SandboxJob
from executor.nsjail import SandboxUnavailable

log = logging.getLogger(__name__)

WIPE_MARGIN_S = 2.0


class SlotFailure(RuntimeError):
    """The slot died or broke protocol while holding a job: our fault, not the code's."""


class Slot:
    """One jailed zygote. ``run`` is not re-entrant: the pool hands a slot to one job at a time."""

    def __init__(self, index: int, outside_id: int, config: SlotConfig) -> None:
        self.index = index
        self.outside_id = outside_id
        self.config = config
        self.jobs_run = 0
        self.busy = False
        self.start_s = 0.0
        self._jail = JailProcess(f"slot {index}")

    @property
    def alive(self) -> bool:
        """True while the jail process runs."""
        return self._jail.alive

    @property
    def pid(self) -> int | None:
        """The nsjail process's pid on the host, while it runs."""
        return self._jail.pid

    async def start(self) -> None:
        """Starts the jail and waits for the zygote's ready frame."""
        started = time.monotonic()
        pipe = asyncio.subprocess.PIPE
        proc = await self._jail.spawn(self.config.argv(self.outside_id, {}), pipe, pipe)
        try:
            assert proc.stdout is not None
            ready = await asyncio.wait_for(framing.read(proc.stdout), self.config.start_timeout_s)
        except (framing.FrameError, TimeoutError) as exc:
            await self.stop()
            raise SandboxUnavailable(
                f"slot {self.index}: the sandbox did not start ({exc}); nsjail said:\n"
                f"{self._jail.stderr_tail()}"
            ) from exc
        self.start_s = time.monotonic() - started
        log.debug("slot %d ready in %.3f s: %s", self.index, self.start_s, ready)

    async def run(self, job: SandboxJob) -> Execution:
        """Runs one job; raises SlotFailure (after stopping the jail) if the slot breaks."""
        proc = self._jail.proc
        if proc is None or proc.stdin is None or proc.stdout is None or not self.alive:
            raise SlotFailure(f"slot {self.index} is not running")
        budget_s = job.limits.timeout_s + self.config.kill_grace_s + WIPE_MARGIN_S
        self.busy = True
        try:
            proc.stdin.write(framing.encode(job.to_wire()))
            await proc.stdin.drain()
            message = await asyncio.wait_for(framing.read(proc.stdout), budget_s)
        except (framing.FrameError, TimeoutError, ConnectionError) as exc:
            await self.stop()
            raise SlotFailure(
                f"slot {self.index} failed: {exc!r}; nsjail said:\n{self._jail.stderr_tail()}"
            ) from exc
        finally:
            self.busy = False
        self.jobs_run += 1
        return Execution.model_validate(message)

    async def stop(self) -> None:
        """Ends the jail (EOF, then SIGTERM, then SIGKILL)."""
        proc = self._jail.proc

        def close_input() -> None:
            if proc is not None and proc.stdin is not None:
                proc.stdin.close()

        await self._jail.stop(close_input)
