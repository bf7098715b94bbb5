"""The forked child: applies the job's limits, sets up its streams, runs the code, reports.

Runs inside the jail with the zygote's preloaded modules already imported.
"""

import _signal
import ast
import builtins
import os
import resource
import signal
import sys
import traceback

from .framing import HEADER

CODE_FILENAME = "<code>"
WORK_DIR = "/work"
PR_SET_DUMPABLE = 4
_libc = None


def set_dumpable(flag):
    """Whether this process's memory and /proc files are readable by its own uid."""
    global _libc
    if _libc is None:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
    _libc.prctl(PR_SET_DUMPABLE, flag, 0, 0, 0)


def apply_limits(limits):
    """Sets this process's rlimits from a job's (or a session's) limits."""
    cpu_s = max(1, int(limits["cpu_time_s"] + 0.999))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    # Address space = what the zygote already maps (mostly shared, untouched) + the budget.
    statm = os.open("/proc/self/statm", os.O_RDONLY)  # no file object: less to copy on write
    try:
        mapped_bytes = int(os.read(statm, 256).split()[0]) * os.sysconf("SC_PAGE_SIZE")
    finally:
        os.close(statm)
    as_bytes = mapped_bytes + limits["memory_bytes"]
    resource.setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"],) * 2)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"],) * 2)
    # The zygote counts against the per-uid process limit too.
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["processes"] + 1,) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def prepare_workload():
    """What a process that will run user code can do before it knows the code.

    A standby child does this while its slot is idle, so that neither the work nor the
    copy-on-write faults it causes (the compiler's, the report's) are on a job's clock.
    """
    os.chdir(WORK_DIR)
    set_dumpable(1)
    _signal.signal(signal.SIGINT, signal.default_int_handler)  # C-level: fewer pages touched
    sys.path.insert(0, WORK_DIR)  # as for a script run from the working directory
    exec(compile("_ = [str(n) for n in range(2)]", CODE_FILENAME, "exec"), new_namespace())
    report_frame(0, False, *cpu_and_rss())


def enter_workload(limits):
    """What every process that runs user code does first: cwd, /proc access, limits."""
    prepare_workload()
    apply_limits(limits)


def prepare_std_streams():
    """Once, in the zygote: the std stream objects every child inherits, on fds 0, 1 and 2.

    A child only swaps the descriptors underneath (its pipes), so it does not build three
    file objects per job. The zygote must never write to them: a child would inherit the
    buffer.
    """
    sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", errors="replace", closefd=False)
    sys.stdout = sys.__stdout__ = open(
        1, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )
    sys.stderr = sys.__stderr__ = open(
        2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False
    )


def _write_files(files):
    for rel_path, text in files.items():
        path = os.path.join(WORK_DIR, rel_path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)


def _execute(code, echo_last_expr, namespace):
    import linecache

    linecache.cache[CODE_FILENAME] = (len(code), None, code.splitlines(True), CODE_FILENAME)
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


def new_namespace():
    """Globals for code run as ``__main__``."""
    return {"__name__": "__main__", "__builtins__": builtins}


def run_code(code, echo_last_expr, namespace):
    """Runs code in ``namespace``; returns (exit_code, memory_error). Failures go to stderr."""
    try:
        _execute(code, echo_last_expr, namespace)
        return 0, False
    except SystemExit as exc:
        return _exit_code(exc), False
    except MemoryError as exc:
        _print_user_traceback(exc)
        return 1, True
    except BaseException as exc:  # the workload's failure is data, reported on stderr
        _print_user_traceback(exc)
        return 1, False


def cpu_and_rss():
    """CPU seconds used by this process and its waited-for children, and the peak RSS."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    return cpu_s, max(own.ru_maxrss, kids.ru_maxrss) * 1024


def report_frame(exit_code, memory_error, cpu_s, max_rss_bytes):
    """The child's last words as one frame of JSON, formatted without the json module.

    ``json.dumps`` in a fresh child touches (and so copies) ~65 more of the zygote's pages
    than this: 0.3-0.4 ms of every job. The zygote reads it with ``json.loads``.
    """
    body = b'{"exit_code": %d, "memory_error": %s, "cpu_s": %.6f, "max_rss_bytes": %d}' % (
        exit_code, b"true" if memory_error else b"false", cpu_s, max_rss_bytes,
    )  # fmt: skip
    return HEADER.pack(len(body)) + body


def child_main(job, status_fd):
    """In a standby child prepared by ``prepare_workload``: limits, files, code. Never returns."""
    exit_code, memory_error = 1, False
    prepared_cpu_s = cpu_and_rss()[0]  # the standby's own preparation is not the job's
    try:
        apply_limits(job)
        _write_files(job["files"])
        exit_code, memory_error = run_code(job["code"], job["echo_last_expr"], new_namespace())
    except BaseException as exc:  # our own set-up failed (a bad file path, say): on stderr
        _print_user_traceback(exc)
    try:
        import atexit

        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os.close(1)
        os.close(2)
        cpu_s, max_rss_bytes = cpu_and_rss()
        cpu_s = max(0.0, cpu_s - prepared_cpu_s)
        # The child's last words, so that the zygote can answer before teardown ends. One
        # write of under PIPE_BUF bytes: it arrives whole.
        os.write(status_fd, report_frame(exit_code, memory_error, cpu_s, max_rss_bytes))
    except BaseException:
        pass
    os._exit(exit_code)
