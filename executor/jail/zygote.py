"""The zygote: runs inside the nsjail sandbox, forks one child per job.

The ``executor.jail`` package runs in the sandbox's own interpreter: the worker stages a
read-only copy of it into each jail (see ``executor/jail_code.py``), so it uses the standard
library only and must stay compatible with Python 3.11. The worker never imports it.

Protocol on the zygote's original stdin/stdout (the worker's pipes): the zygote first sends
``{"ready": ...}`` as a JSON frame (4-byte big-endian length, then the body), then answers
each job frame with one result frame, both binary (``protocol``).

The zygote is pid 1 of the jail's pid namespace. That gives three properties for free:
processes inside the namespace cannot SIGKILL it (the kernel ignores signals to a namespace's
init that it has no handler for), ``kill(-1, SIGKILL)`` ends every other process of the jail
(daemons that called setsid included), and orphans are re-parented to it for reaping.
"""

import gc
import json
import os
import signal
import sys

from .child import prepare_std_streams, set_dumpable
from .cleanup import record_work_dirs, wipe_work_dirs
from .fork import choose_fork, reseed_generators
from .framing import write_frame
from .hugepages import collapse_heap
from .process import Run, Standby, read_job


def _preload(module_names):
    import importlib

    loaded = []
    for name in module_names:
        importlib.import_module(name)
        loaded.append(name)
    return loaded


def _prepare_for_fork(huge_pages):
    """Makes each fork cheap: nothing left for the child to initialise or to copy on write.

    Returns how many huge pages the heap was collapsed into.
    """
    reseed_generators()  # the first call pays one-time costs: the generators' first seeding
    gc.collect()
    # Without this the child's first collection touches every preloaded object, copying
    # most of the zygote's heap (measured: 80 ms per job with numpy, sympy and scipy).
    gc.freeze()
    return collapse_heap() if huge_pages else 0


def _schedule_as_batch():
    """SCHED_BATCH for the zygote and every child it forks: same CPU share, no wake-up preemption.

    Handing a job to a zygote wakes it; as a normal task it would preempt the worker at once,
    which then waits to dispatch its next job (48% of the worker's busy time in a 2,000-job
    batch was spent so, mid-write). A batch task waits for the CPU it was woken on to be given
    up. Measured on this project's VM, 2 workers x 32 slots: +4% trivial and numpy jobs/s.
    Returns whether the policy was taken (an unprivileged process may always lower itself).
    """
    try:
        os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
    except OSError:
        return False
    return True


def _harden_self():
    # Children run with this uid: they must not read our memory or environment. Each child
    # turns dumpable back on, so that its own /proc/self stays readable to it.
    set_dumpable(0)
    # As pid 1, a signal with the default disposition is dropped; Python's SIGINT handler
    # would otherwise let a job raise KeyboardInterrupt in us.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main():
    """Preloads, hardens itself, then serves jobs (or hosts sessions) until its input closes."""
    config = json.loads(sys.argv[1])
    ctrl_in, ctrl_out = os.dup(0), os.dup(1)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints of preloaded modules must not corrupt the protocol
    os.close(devnull)
    hosts_sessions = config.get("mode") == "sessions"
    if hosts_sessions:  # imported here, not at the top: a job zygote stays smaller without it
        from . import sessions
    loaded = _preload(config["preload"])
    prepare_std_streams()
    huge_pages = _prepare_for_fork(config.get("huge_pages", False))
    fork = choose_fork()
    _harden_self()
    batch = _schedule_as_batch()
    record_work_dirs()
    wipe_work_dirs()
    ready = {
        "ready": True,
        "pid": os.getpid(),
        "python": sys.version,
        "preloaded": loaded,
        "huge_pages": huge_pages,
        "fork_hooks": fork is os.fork,
        "sched_batch": batch,
    }
    if hosts_sessions:
        os.close(ctrl_out)
        sessions.host_main(sessions.socket.socket(fileno=ctrl_in), ready)
        return
    write_frame(ctrl_out, ready)
    serve_jobs(ctrl_in, ctrl_out, fork)


def serve_jobs(ctrl_in, ctrl_out, fork):
    """One job at a time: dispatch to the standby child, answer, clean up, fork the next."""
    standby = Standby((ctrl_in, ctrl_out), fork)
    while True:
        job = read_job(ctrl_in)
        if job is None:
            return
        run = Run(standby, job)
        run.drain()
        run.answer(ctrl_out)
        # Teardown happens after the answer: the next job waits for it, the client does not.
        run.clean_up()
        wipe_work_dirs()
        standby = Standby((ctrl_in, ctrl_out), fork)
