"""The zygote: runs inside the nsjail sandbox, forks one child per job.

This file is executed by the sandbox's own interpreter (passed as ``python -I -c <source>``),
so it uses the standard library only and must stay compatible with Python 3.11. It is never
imported by the worker.

Protocol on the zygote's original stdin/stdout (the worker's pipes): frames of a 4-byte
big-endian length followed by a UTF-8 JSON object. The zygote first sends ``{"ready": ...}``,
then answers each job request with one result object.

The zygote is pid 1 of the jail's pid namespace. That gives three properties for free:
processes inside the namespace cannot SIGKILL it (the kernel ignores signals to a namespace's
init that it has no handler for), ``kill(-1, SIGKILL)`` ends every other process of the jail
(daemons that called setsid included), and orphans are re-parented to it for reaping.
"""

import ast
import builtins
import json
import os
import resource
import selectors
import shutil
import signal
import struct
import sys
import time
import traceback

CODE_FILENAME = "<code>"
WORK_DIRS = ("/work", "/tmp", "/dev/shm")
READ_CHUNK_BYTES = 65536
_HEADER = struct.Struct(">I")


# --- framing ---------------------------------------------------------------------------------


def _read_exact(fd, size):
    chunks = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd):
    header = _read_exact(fd, _HEADER.size)
    if header is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(header)[0])
    return None if body is None else json.loads(body)


def write_frame(fd, message):
    data = json.dumps(message).encode()
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


# --- output capture --------------------------------------------------------------------------


class Capture:
    """Keeps the head and the tail of a byte stream, counting what it drops."""

    def __init__(self, cap_bytes):
        self.head_cap = cap_bytes // 2
        self.tail_cap = cap_bytes - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total_bytes = 0

    def feed(self, data):
        self.total_bytes += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def truncated(self):
        return self.total_bytes > len(self.head) + len(self.tail)

    def text(self):
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        dropped = self.total_bytes - len(self.head) - len(self.tail)
        marker = "\n[... codepool: %d bytes truncated ...]\n" % dropped
        head = bytes(self.head).decode("utf-8", "replace")
        return head + marker + bytes(self.tail).decode("utf-8", "replace")


# --- the child: runs the job's code ----------------------------------------------------------


def _set_limits(job):
    cpu_s = max(1, int(job["cpu_time_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    # Address space = what the zygote already maps (mostly shared, untouched) + the job's budget.
    with open("/proc/self/statm") as statm:
        mapped_bytes = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    as_bytes = mapped_bytes + job["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (job["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (job["open_files"],) * 2)
    # The zygote counts against the per-uid process limit too.
    resource.setrlimit(resource.RLIMIT_NPROC, (job["processes"] + 1,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _reopen_std_streams():
    sys.stdin = sys.__stdin__ = open(0, "r", encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = sys.__stdout__ = open(
        1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )
    sys.stderr = sys.__stderr__ = open(
        2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )


def _write_files(files):
    for rel_path, text in files.items():
        path = os.path.join("/work", rel_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)


def _execute(code, echo_last_expr):
    import linecache

    linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(True), CODE_FILENAME)
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    if not echo_last_expr:  # the common case skips building an AST in Python
        exec(compile(code, CODE_FILENAME, "exec"), namespace)
        return
    tree = ast.parse(code, CODE_FILENAME)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, CODE_FILENAME, "exec"), namespace)
    if last is not None:
        value = eval(compile(last, CODE_FILENAME, "eval"), namespace)
        if value is not None:
            print(repr(value))


def _print_user_traceback(exc):
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != CODE_FILENAME:
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _exit_code(exc):
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _report(status_fd, exit_code, memory_error):
    """The child's last words: its outcome, so the zygote can answer before teardown ends."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "exit_code": exit_code,
        "memory_error": memory_error,
        "cpu_s": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
        "max_rss_bytes": max(own.ru_maxrss, kids.ru_maxrss) * 1024,
    }
    write_frame(status_fd, report)


def child_main(job, status_fd):
    """Runs in the forked child: limits, std streams, then the code. Never returns."""
    exit_code, memory_error = 1, False
    try:
        os.chdir("/work")
        _set_dumpable(1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        _set_limits(job)
        _reopen_std_streams()
        _write_files(job["files"])
        sys.path.insert(0, "/work")  # as for a script run from the working directory
        _execute(job["code"], job["echo_last_expr"])
        exit_code = 0
    except SystemExit as exc:
        exit_code = _exit_code(exc)
    except MemoryError as exc:
        memory_error = True
        _print_user_traceback(exc)
    except BaseException as exc:  # the workload's failure is data, reported on stderr
        _print_user_traceback(exc)
    try:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os.close(1)
        os.close(2)
        _report(status_fd, exit_code, memory_error)
    except BaseException:
        pass
    os._exit(exit_code)


# --- the zygote: fork ahead, dispatch, drain, reap, clean ------------------------------------


def _reseed():
    """Fresh random state for the next child, set here where no page is shared yet.

    Python's ``random`` reseeds itself in each child (an at-fork hook); numpy's global state
    does not, and reseeding it in the child would copy ~120 shared pages per job.
    """
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


class Standby:
    """A child forked ahead of its job, so fork's cost is paid while the slot is idle."""

    def __init__(self, ctrl_fds):
        _reseed()
        job_r, self.job_w = os.pipe()
        in_r, self.in_w = os.pipe()
        self.out_r, out_w = os.pipe()
        self.err_r, err_w = os.pipe()
        self.status_r, status_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            for fd in ctrl_fds + (self.job_w, self.in_w, self.out_r, self.err_r, self.status_r):
                os.close(fd)
            os.dup2(in_r, 0)
            os.dup2(out_w, 1)
            os.dup2(err_w, 2)
            for fd in (in_r, out_w, err_w):
                os.close(fd)
            job = read_frame(job_r)
            os.close(job_r)
            if job is None:
                os._exit(0)
            child_main(job, status_w)
        for fd in (job_r, in_r, out_w, err_w, status_w):
            os.close(fd)


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
        self._status_buffer = bytearray()
        self.reaped = None  # (wait_status, rusage) once waited for
        self.started = time.monotonic()
        write_frame(standby.job_w, job)
        os.close(standby.job_w)

    def kill(self, verdict):
        if self.verdict is None:
            self.verdict = verdict
        os.kill(self.pid, signal.SIGKILL)

    def drain(self):
        """Feeds stdin, reads output until the child reports or exits, the wall limit or flood."""
        stdin = memoryview(self.job["stdin"].encode("utf-8", "surrogateescape"))
        sel = selectors.DefaultSelector()
        pidfd = os.pidfd_open(self.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
        sel.register(self.child.status_r, selectors.EVENT_READ, "status")
        sel.register(self.child.out_r, selectors.EVENT_READ, self.stdout)
        sel.register(self.child.err_r, selectors.EVENT_READ, self.stderr)
        if stdin:
            os.set_blocking(self.in_w, False)
            sel.register(self.in_w, selectors.EVENT_WRITE, "stdin")
        else:
            self._close_stdin()
        deadline = self.started + self.job["timeout_s"]
        done = False
        while not done and self.verdict is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.kill("timeout")
                break
            for key, _ in sel.select(remaining):
                if key.data == "exit":
                    done = True
                elif key.data == "status":
                    done = self._read_status(sel) or done
                elif key.data == "stdin":
                    stdin = self._feed_stdin(sel, stdin)
                else:
                    self._read(sel, key.fd, key.data)
        sel.close()
        os.close(pidfd)
        self.wall_s = time.monotonic() - self.started
        if self.report is None:
            self.reaped = os.wait4(self.pid, 0)[1:]
        self._drain_leftovers()

    def _close_stdin(self):
        if self.in_w >= 0:
            os.close(self.in_w)
            self.in_w = -1

    def _feed_stdin(self, sel, stdin):
        try:
            stdin = stdin[os.write(self.in_w, stdin[:READ_CHUNK_BYTES]) :]
        except BlockingIOError:
            return stdin
        except BrokenPipeError:  # the code stopped reading: the rest is not wanted
            stdin = stdin[:0]
        if not stdin:
            sel.unregister(self.in_w)
            self._close_stdin()
        return stdin

    def _read_status(self, sel):
        data = os.read(self.child.status_r, 4096)
        if not data:
            sel.unregister(self.child.status_r)
            return False
        self._status_buffer += data
        if len(self._status_buffer) < _HEADER.size:
            return False
        size = _HEADER.unpack(self._status_buffer[: _HEADER.size])[0]
        if len(self._status_buffer) < _HEADER.size + size:
            return False
        try:
            self.report = json.loads(bytes(self._status_buffer[_HEADER.size :]))
        except ValueError:  # the job wrote garbage on our pipe: fall back to its exit status
            sel.unregister(self.child.status_r)
            return False
        return True

    def _read(self, sel, fd, capture):
        data = os.read(fd, READ_CHUNK_BYTES)
        if not data:
            sel.unregister(fd)
            return
        capture.feed(data)
        if self.stdout.total_bytes + self.stderr.total_bytes > self.job["output_kill_bytes"]:
            self.kill("output_limit")

    def _drain_leftovers(self):
        """After the end, takes what is already in the pipes without waiting for daemons."""
        for fd, capture in ((self.child.out_r, self.stdout), (self.child.err_r, self.stderr)):
            os.set_blocking(fd, False)
            budget = self.job["output_kill_bytes"]
            while budget > 0:
                try:
                    data = os.read(fd, READ_CHUNK_BYTES)
                except BlockingIOError:
                    break
                if not data:
                    break
                capture.feed(data)
                budget -= len(data)

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
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap_all()
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


def _reap_all():
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _make_tree_writable(top):
    os.chmod(top, 0o700)
    for dirpath, dirnames, _ in os.walk(top):
        for name in dirnames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)


def _wipe(path):
    """Removes everything a job left under ``path``; fails loudly if anything survives."""
    for entry in os.scandir(path):
        try:
            if entry.is_dir(follow_symlinks=False):
                _make_tree_writable(entry.path)
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    leftovers = os.listdir(path)
    if leftovers:
        raise RuntimeError("could not wipe %s: %r" % (path, leftovers[:5]))


def _preload(module_names):
    import importlib

    loaded = []
    for name in module_names:
        importlib.import_module(name)
        loaded.append(name)
    return loaded


def _prepare_for_fork():
    """Makes each fork cheap: nothing left for the child to initialise or to copy on write."""
    import gc

    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()  # the first call pays a one-time cost; children reseed cheaply
    gc.collect()
    # Without this the child's first collection touches every preloaded object, copying
    # most of the zygote's heap (measured: 80 ms per job with numpy, sympy and scipy).
    gc.freeze()


PR_SET_DUMPABLE = 4
_libc = None


def _set_dumpable(flag):
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(PR_SET_DUMPABLE, flag, 0, 0, 0)


def _harden_self():
    # Children run with this uid: they must not read our memory or environment. Each child
    # turns dumpable back on, so that its own /proc/self stays readable to it.
    _set_dumpable(0)
    # As pid 1, a signal with the default disposition is dropped; Python's SIGINT handler
    # would otherwise let a job raise KeyboardInterrupt in us.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main():
    config = json.loads(sys.argv[1])
    ctrl_in, ctrl_out = os.dup(0), os.dup(1)
    devnull = os.open("/dev/null", os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(2, 1)  # stray prints of preloaded modules must not corrupt the protocol
    os.close(devnull)
    loaded = _preload(config["preload"])
    _prepare_for_fork()
    _harden_self()
    for path in WORK_DIRS:
        _wipe(path)
    write_frame(ctrl_out, {"ready": True, "pid": os.getpid(), "python": sys.version, "preloaded": loaded})
    standby = Standby((ctrl_in, ctrl_out))
    while True:
        job = read_frame(ctrl_in)
        if job is None:
            return
        run = Run(job, standby)
        run.drain()
        write_frame(ctrl_out, run.result())
        # Teardown happens after the answer: the next job waits for it, the client does not.
        run.clean_up()
        for path in WORK_DIRS:
            _wipe(path)
        standby = Standby((ctrl_in, ctrl_out))


if __name__ == "__main__":
    main()
