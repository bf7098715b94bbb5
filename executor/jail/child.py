"""The forked child: applies the job's limits, sets up its streams, runs the code, reports.

Runs inside the jail with the zygote's preloaded modules already imported. Everything a job's
child calls between its fork and its exit copies the pages it writes from the zygote, so the
per-job path here imports nothing, builds few objects and decodes its task from ``struct``
fields (``protocol``); what can be done before the job exists is done by the standby.
"""

import _signal
import ast
import atexit
import builtins
import ctypes
import json
import linecache
import os
import resource
import signal
import sys
import traceback

from .protocol import REPORT, TASK

CODE_FILENAME = "<code>"
WORK_DIR = "/work"
PR_SET_DUMPABLE = 4
_prctl = None


def set_dumpable(flag):
    """Whether this process's memory and /proc files are readable by its own uid."""
    global _prctl
    if _prctl is None:  # built once, in the zygote: a child only calls it
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
        _prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong,
                           ctypes.c_ulong]  # fmt: skip
        _prctl.restype = ctypes.c_int
    _prctl(PR_SET_DUMPABLE, flag, 0, 0, 0)


def mapped_bytes():
    """The address space this process maps now; a child's budget starts from its zygote's."""
    statm = os.open("/proc/self/statm", os.O_RDONLY)  # no file object: less to copy on write
    try:
        return int(os.read(statm, 64).split(maxsplit=1)[0]) * resource.getpagesize()
    finally:
        os.close(statm)


def apply_rlimits(cpu_time_s, memory_bytes, processes, file_size_bytes, open_files, mapped):
    """Sets this process's rlimits; ``mapped``: what it maps already (its address-space base)."""
    cpu_s = max(1, int(cpu_time_s + 0.999))
    setrlimit = resource.setrlimit
    setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s + 1))
    # Address space = what the zygote already maps (mostly shared, untouched) + the budget.
    as_bytes = mapped + memory_bytes
    setrlimit(resource.RLIMIT_AS, (as_bytes, as_bytes))
    setrlimit(resource.RLIMIT_FSIZE, (file_size_bytes, file_size_bytes))
    setrlimit(resource.RLIMIT_NOFILE, (open_files, open_files))
    # The zygote counts against the per-uid process limit too.
    setrlimit(resource.RLIMIT_NPROC, (processes + 1, processes + 1))
    setrlimit(resource.RLIMIT_CORE, (0, 0))


def apply_limits(limits):
    """Sets this process's rlimits from a session's limits (a dict, as JSON carries them)."""
    apply_rlimits(
        limits["cpu_time_s"], limits["memory_bytes"], limits["processes"],
        limits["file_size_bytes"], limits["open_files"], mapped_bytes(),
    )  # fmt: skip


def prepare_workload():
    """What a process that will run user code can do before it knows the code.

    A standby child does this while its slot is idle, so that neither the work nor the
    copy-on-write faults it causes (the compiler's, the report's) are on a job's clock.
    Returns the CPU seconds spent so far, which are not the job's.
    """
    os.chdir(WORK_DIR)
    set_dumpable(1)
    _signal.signal(signal.SIGINT, signal.default_int_handler)  # C-level: fewer pages touched
    sys.path.insert(0, WORK_DIR)  # as for a script run from the working directory
    exec(compile("_ = [str(n) for n in range(2)]", CODE_FILENAME, "exec"), new_namespace())
    cpu_s, max_rss_bytes = cpu_and_rss()
    REPORT.pack(0, False, cpu_s, max_rss_bytes)
    return cpu_s


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


def read_task(fd):
    """The child's part of a job frame, read to EOF: (limits, echo_last_expr, code, files).

    None if the zygote closed the pipe without a job (it is shutting down).
    """
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    if not chunks:
        return None
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    *limits, echo_last_expr, code_bytes, files_bytes = TASK.unpack_from(data)
    end = TASK.size + code_bytes
    code = data[TASK.size : end].decode("utf-8", "surrogatepass")
    files = json.loads(data[end : end + files_bytes]) if files_bytes else None
    return limits, echo_last_expr, code, files


def child_main(task, mapped, prepared_cpu_s, status_fd):
    """In a standby child prepared by ``prepare_workload``: limits, files, code. Never returns.

    ``mapped``: the zygote's address space at the fork; ``prepared_cpu_s``: the CPU the
    standby spent preparing, which is not the job's.
    """
    limits, echo_last_expr, code, files = task
    exit_code, memory_error = 1, False
    try:
        apply_rlimits(*limits, mapped)
        if files:
            _write_files(files)
        exit_code, memory_error = run_code(code, echo_last_expr, new_namespace())
    except BaseException as exc:  # our own set-up failed (a bad file path, say): on stderr
        _print_user_traceback(exc)
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os.close(1)
        os.close(2)
        cpu_s, max_rss_bytes = cpu_and_rss()
        # The child's last words, so that the zygote can answer before teardown ends. One
        # write of under PIPE_BUF bytes: it arrives whole.
        cpu_s = max(0.0, cpu_s - prepared_cpu_s)
        os.write(status_fd, REPORT.pack(exit_code, memory_error, cpu_s, max_rss_bytes))
    except BaseException:
        pass
    os._exit(exit_code)
