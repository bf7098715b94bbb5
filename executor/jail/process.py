"""The zygote's side of one job: a child forked ahead, fed, drained, timed, reaped.

All of this runs while the zygote shares its pages copy-on-write with a child, so it keeps to
few objects: the job's header is unpacked, its body passed to the child unread, and the
child's report and output sent back as bytes (``protocol``).
"""

import gc
import os
import select
import signal
import time

from .capture import Capture, read_available
from .child import child_main, mapped_bytes, prepare_workload, read_task
from .cleanup import end_all_other_processes
from .fork import reseed_generators
from .protocol import FRAME, JOB_FIELDS_BYTES, JOB_HEAD, OUTPUT_LIMIT, REPORT, RESULT, TIMEOUT

READ_CHUNK_BYTES = 65536


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd, size):
    """``size`` bytes from a blocking ``fd``; None on EOF before them."""
    data = os.read(fd, size)
    if len(data) == size:  # the usual case: the worker writes a frame in one go
        return data
    chunks = [data]
    while size > len(data):
        if not data:
            return None
        size -= len(data)
        data = os.read(fd, size)
        chunks.append(data)
    return b"".join(chunks)


def read_job(fd):
    """The next job frame: (timeout_s, output_cap_bytes, output_kill_bytes, stdin, task).

    ``stdin`` and ``task`` (the child's part, unread here) are views into one buffer. None
    when the worker closed the pipe.
    """
    head = _read_exact(fd, JOB_HEAD.size)
    if head is None:
        return None
    frame_bytes, timeout_s, cap_bytes, kill_bytes, stdin_bytes = JOB_HEAD.unpack(head)
    rest = _read_exact(fd, frame_bytes - JOB_FIELDS_BYTES)
    if rest is None:
        return None
    view = memoryview(rest)
    return timeout_s, cap_bytes, kill_bytes, view[:stdin_bytes], view[stdin_bytes:]


class Standby:
    """A child forked ahead of its job, so fork's cost is paid while the slot is idle."""

    def __init__(self, ctrl_fds, fork):
        reseed_generators()
        # What the zygote allocated since the last fork joins the permanent generation, so a
        # collection in the child walks (and copies the pages of) the child's objects only.
        gc.freeze()
        mapped = mapped_bytes()  # the child's, at the fork: its address-space budget's base
        job_r, self.job_w = os.pipe()
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.pid = fork()
        if self.pid == 0:
            try:
                self._become_child(ctrl_fds, mapped, job_r, in_r, out_w, err_w, status_w)
            finally:  # whatever happened, the copy of the zygote never returns into its loop
                os._exit(1)
        for fd in (job_r, in_r, out_w, err_w, status_w):
            os.close(fd)

    def _become_child(self, ctrl_fds, mapped, job_r, in_r, out_w, err_w, status_w):
        for fd in (*ctrl_fds, self.job_w, self.in_w, self.out_r, self.err_r, self.status_r):
            os.close(fd)
        os.dup2(in_r, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        for fd in (in_r, out_w, err_w):
            os.close(fd)
        prepared_cpu_s = prepare_workload()
        task = read_task(job_r)
        os.close(job_r)
        if task is None:
            os._exit(0)
        child_main(task, mapped, prepared_cpu_s, status_w)


class Run:
    """One job's child seen from the zygote: its pipes, captures and outcome."""

    def __init__(self, standby, job):
        self.timeout_s, cap_bytes, self.kill_bytes, self.stdin, task = job
        self.child = standby
        self.pid = standby.pid
        self.in_w = standby.in_w
        self.stdout = Capture(cap_bytes)
        self.stderr = Capture(cap_bytes)
        self.verdict = 0  # set when the zygote ends the child: protocol.TIMEOUT, OUTPUT_LIMIT
        self.report = None  # the child's own account of how it ended (REPORT bytes)
        self.reaped = None  # (wait_status, rusage) once waited for
        self.wall_s = 0.0
        self.started = time.monotonic()
        _write_all(standby.job_w, task)
        os.close(standby.job_w)

    def kill(self, verdict):
        if not self.verdict:
            self.verdict = verdict
        os.kill(self.pid, signal.SIGKILL)

    def drain(self):
        """Feeds stdin, reads output until the child reports or exits, the wall limit or flood."""
        poll = select.poll()  # plain poll: one object per job, nothing to register twice
        pidfd = os.pidfd_open(self.pid)
        out_r, err_r, status_r = self.child.out_r, self.child.err_r, self.child.status_r
        for fd in (pidfd, status_r, out_r, err_r):
            poll.register(fd, select.POLLIN)
        stdin = self.stdin
        if stdin:
            os.set_blocking(self.in_w, False)
            poll.register(self.in_w, select.POLLOUT)
        else:
            self._close_stdin()
        deadline = self.started + self.timeout_s
        done = False
        while not done and not self.verdict:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill(TIMEOUT)
                break
            for fd, _ in poll.poll(remaining * 1000 + 1):
                if fd == out_r:
                    self._read(poll, fd, self.stdout)
                elif fd == status_r:
                    done = self._read_status(poll) or done
                elif fd == pidfd:
                    done = True
                elif fd == err_r:
                    self._read(poll, fd, self.stderr)
                else:
                    stdin = self._feed_stdin(poll, stdin)
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
        # One write of a fixed size: anything else is the job's garbage on our pipe, and its
        # exit status is what counts then.
        if len(data) != REPORT.size:
            poll.unregister(self.child.status_r)
            return False
        self.report = data
        return True

    def _read(self, poll, fd, capture):
        data = os.read(fd, READ_CHUNK_BYTES)
        if not data:
            poll.unregister(fd)
            return
        capture.feed(data)
        if self.stdout.total_bytes + self.stderr.total_bytes > self.kill_bytes:
            self.kill(OUTPUT_LIMIT)

    def _drain_leftovers(self):
        """After the end, takes what is already in the pipes without waiting for daemons."""
        for fd, capture in ((self.child.out_r, self.stdout), (self.child.err_r, self.stderr)):
            os.set_blocking(fd, False)
            read_available(fd, capture, self.kill_bytes)

    def answer(self, fd):
        """Sends the result frame: the verdict, the report or wait status, the captured bytes."""
        out, err = self.stdout, self.stderr
        if self.report is not None:
            reported, report, wait_status, cpu_s, max_rss_kib = True, self.report, 0, 0.0, 0
        else:
            wait_status, usage = self.reaped
            reported, report = False, b""
            cpu_s, max_rss_kib = usage.ru_utime + usage.ru_stime, usage.ru_maxrss
        head = RESULT.pack(
            self.verdict, reported, report, wait_status, cpu_s, max_rss_kib, self.wall_s,
            out.total_bytes, len(out.head), len(out.tail),
            err.total_bytes, len(err.head), len(err.tail),
        )  # fmt: skip
        parts = (head, out.head, out.tail, err.head, err.tail)
        _write_all(fd, FRAME.pack(sum(map(len, parts))) + b"".join(parts))

    def clean_up(self):
        """Ends every process of the jail but the zygote and closes this run's pipes."""
        if self.reaped is None:
            os.wait4(self.pid, 0)
        end_all_other_processes()
        self._close_stdin()
        for fd in (self.child.out_r, self.child.err_r, self.child.status_r):
            os.close(fd)
