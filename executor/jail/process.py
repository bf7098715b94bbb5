"""The zygote's side of one job: a child forked ahead, fed, drained, timed, reaped."""

import marshal
import os
import select
import signal
import time

from .capture import Capture, read_available
from .child import child_main, prepare_workload
from .cleanup import end_all_other_processes
from .fork import reseed_generators
from .framing import FrameBuffer

READ_CHUNK_BYTES = 65536


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_job(fd):
    """The job the zygote sends a standby child: marshal bytes up to EOF; None if there are none."""
    chunks = []
    while chunk := os.read(fd, READ_CHUNK_BYTES):
        chunks.append(chunk)
    return marshal.loads(b"".join(chunks)) if chunks else None


class Standby:
    """A child forked ahead of its job, so fork's cost is paid while the slot is idle."""

    def __init__(self, ctrl_fds, fork):
        reseed_generators()
        job_r, self.job_w = os.pipe()
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.pid = fork()
        if self.pid == 0:
            try:
                self._become_child(ctrl_fds, job_r, in_r, out_w, err_w, status_w)
            finally:  # whatever happened, the copy of the zygote never returns into its loop
                os._exit(1)
        for fd in (job_r, in_r, out_w, err_w, status_w):
            os.close(fd)

    def _become_child(self, ctrl_fds, job_r, in_r, out_w, err_w, status_w):
        for fd in (*ctrl_fds, self.job_w, self.in_w, self.out_r, self.err_r, self.status_r):
            os.close(fd)
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        prepare_workload()
        job = _read_job(job_r)
        os.close(job_r)
        if job is None:
            os._exit(0)
        child_main(job, status_w)


class Run:
    """One job's child seen from the zygote: its pipes, captures and outcome."""

    def __init__(self, job, standby):
        self.job = job
        self.child = standby
        self.pid = standby.pid
        self.in_w = standby.in_w
        self.stdout = Capture(job["output_cap_bytes"])
        self.stderr = Capture(job["output_cap_bytes"])
        self.verdict = None  # set when the zygote kills the child: "timeout" / "output_limit"
        self.report = None  # the child's own account of how it ended
        self._status = FrameBuffer()
        self.reaped = None  # (wait_status, rusage) once waited for
        self.started = time.monotonic()
        # marshal, not JSON: the child decodes it in C, touching (and copying) fewer pages.
        # Trusted direction only; what the child sends back is JSON. stdin goes by its pipe.
        _write_all(standby.job_w, marshal.dumps({k: v for k, v in job.items() if k != "stdin"}))
        os.close(standby.job_w)

    def kill(self, verdict):
        if self.verdict is None:
            self.verdict = verdict
        os.kill(self.pid, signal.SIGKILL)

    def drain(self):
        """Feeds stdin, reads output until the child reports or exits, the wall limit or flood."""
        stdin = memoryview(self.job["stdin"].encode("utf-8", "surrogateescape"))
        poll = select.poll()  # plain poll: one object per job, nothing to register twice
        pidfd = os.pidfd_open(self.pid)
        captures = {self.child.out_r: self.stdout, self.child.err_r: self.stderr}
        for fd in (pidfd, self.child.status_r, *captures):
            poll.register(fd, select.POLLIN)
        if stdin:
            os.set_blocking(self.in_w, False)
            poll.register(self.in_w, select.POLLOUT)
        else:
            self._close_stdin()
        deadline = self.started + self.job["timeout_s"]
        done = False
        while not done and self.verdict is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill("timeout")
                break
            for fd, _ in poll.poll(remaining * 1000 + 1):
                if fd == pidfd:
                    done = True
                elif fd == self.child.status_r:
                    done = self._read_status(poll) or done
                elif fd == self.in_w:
                    stdin = self._feed_stdin(poll, stdin)
                elif fd in captures:
                    self._read(poll, fd, captures[fd])
        os.close(pidfd)
        self.wall_s = time.monotonic() - self.started
        if self.report is None:
            self.reaped = os.wait4(self.pid, 0)[1:]
        self._drain_leftovers()

    def _close_stdin(self):
        if self.in_w >= 0:
            os.close(self.in_w)
            self.in_w = -1

    def _feed_stdin(self, poll, stdin):
        try:
            stdin = stdin[os.write(self.in_w, stdin[:READ_CHUNK_BYTES]) :]
        except BlockingIOError:
            return stdin
        except BrokenPipeError:  # the code stopped reading: the rest is not wanted
            stdin = stdin[:0]
        if not stdin:
            poll.unregister(self.in_w)
            self._close_stdin()
        return stdin

    def _read_status(self, poll):
        data = os.read(self.child.status_r, 4096)
        if not data:
            poll.unregister(self.child.status_r)
            return False
        try:
            self.report = self._status.feed(data)
        except ValueError:  # the job wrote garbage on our pipe: fall back to its exit status
            poll.unregister(self.child.status_r)
            return False
        return self.report is not None

    def _read(self, poll, fd, capture):
        data = os.read(fd, READ_CHUNK_BYTES)
        if not data:
            poll.unregister(fd)
            return
        capture.feed(data)
        if self.stdout.total_bytes + self.stderr.total_bytes > self.job["output_kill_bytes"]:
            self.kill("output_limit")

    def _drain_leftovers(self):
        """After the end, takes what is already in the pipes without waiting for daemons."""
        for fd, capture in ((self.child.out_r, self.stdout), (self.child.err_r, self.stderr)):
            os.set_blocking(fd, False)
            read_available(fd, capture, self.job["output_kill_bytes"])

    def result(self):
        """The job's result, from the child's report or, failing that, its wait status."""
        if self.report is not None and self.verdict is None:
            report = self.report
            exit_code, signal_number = int(report["exit_code"]), None
            cpu_s, max_rss_bytes = float(report["cpu_s"]), int(report["max_rss_bytes"])
            memory_error = bool(report["memory_error"])
        else:
            wait_status, usage = self.reaped
            exit_code = os.waitstatus_to_exitcode(wait_status)
            signal_number = -exit_code if exit_code < 0 else None
            cpu_s = usage.ru_utime + usage.ru_stime
            max_rss_bytes = usage.ru_maxrss * 1024
            memory_error = False
        status = self.verdict or _status_from_exit(
            exit_code, signal_number, cpu_s, memory_error, self.job
        )
        return {
            "status": status,
            "exit_code": exit_code if signal_number is None else None,
            "signal": signal.Signals(signal_number).name if signal_number else None,
            "stdout": self.stdout.text(),
            "stderr": self.stderr.text(),
            "stdout_truncated": self.stdout.truncated,
            "stderr_truncated": self.stderr.truncated,
            "wall_s": self.wall_s,
            "cpu_s": cpu_s,
            "max_rss_bytes": max_rss_bytes,
        }

    def clean_up(self):
        """Ends every process of the jail but the zygote and closes this run's pipes."""
        if self.reaped is None:
            os.wait4(self.pid, 0)
        end_all_other_processes()
        self._close_stdin()
        for fd in (self.child.out_r, self.child.err_r, self.child.status_r):
            os.close(fd)


def _status_from_exit(exit_code, signal_number, cpu_s, memory_error, job):
    if memory_error:
        return "memory_limit"
    # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one (soft + 1 s).
    if signal_number == signal.SIGXCPU:
        return "timeout"
    if signal_number == signal.SIGKILL and cpu_s >= job["cpu_time_s"]:
        return "timeout"
    if signal_number is not None:
        return "killed"
    return "ok" if exit_code == 0 else "error"
