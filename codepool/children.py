"""Child processes of ``codepool serve``: started in their own session, stopped by pid."""

import ctypes
import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # If serve itself is killed, its children get SIGTERM instead of living on as orphans.
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


@dataclass(frozen=True)
class ChildSpec:
    """How a child was started, so that it can be started again."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path | None


@dataclass
class Children:
    """The processes serve started, in start order."""

    procs: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)
    specs: dict[str, ChildSpec] = field(default_factory=dict)

    def start(
        self, name: str, argv: list[str], env: dict[str, str], log_path: Path | None = None
    ) -> subprocess.Popen[bytes]:
        """Starts one child in a session of its own (a terminal's Ctrl-C reaches only serve)."""
        self.specs[name] = ChildSpec(argv, env, log_path)
        proc = self._spawn(name)
        self.procs.append((name, proc))
        return proc

    def restart(self, name: str) -> subprocess.Popen[bytes]:
        """Starts the named child again, as it was first started; it takes the old one's place."""
        index = next(i for i, (known, _) in enumerate(self.procs) if known == name)
        old = self.procs[index][1]
        if old.poll() is None:
            raise RuntimeError(f"{name} (pid {old.pid}) is still running")
        proc = self._spawn(name)
        self.procs[index] = (name, proc)
        return proc

    def _spawn(self, name: str) -> subprocess.Popen[bytes]:
        spec = self.specs[name]
        out = open(spec.log_path, "ab") if spec.log_path else None  # noqa: SIM115 (closed below)
        try:
            proc = subprocess.Popen(
                spec.argv, env=spec.env, start_new_session=True, preexec_fn=_die_with_parent,
                stdout=out, stderr=subprocess.STDOUT if out else None,
            )  # fmt: skip
        finally:
            if out is not None:
                out.close()
        log.debug("started %s pid %d", name, proc.pid)
        return proc

    def exited(self) -> tuple[str, int] | None:
        """(name, exit code) of the first child that is no longer running, if any."""
        for name, proc in self.procs:
            code = proc.poll()
            if code is not None:
                return name, code
        return None

    def stop(self, names: tuple[str, ...], grace_s: float) -> None:
        """SIGTERM to the named children, then SIGKILL to those still alive after ``grace_s``."""
        chosen = [proc for name, proc in self.procs if name.startswith(names)]
        for proc in chosen:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in chosen:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("pid %d ignored SIGTERM; killing it", proc.pid)
                proc.kill()
                proc.wait()

    @property
    def pids(self) -> list[int]:
        """Pids of every child started (running or not)."""
        return [proc.pid for _, proc in self.procs]


def child_env(**values: str) -> dict[str, str]:
    """This process's environment plus ``values``."""
    return {**os.environ, **values}
