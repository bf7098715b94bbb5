"""What the zygote does between jobs so that nothing of one job reaches the next."""

import contextlib
import os
import signal
import stat

WORK_DIRS = ("/work", "/tmp", "/dev/shm")
# tmpfs gives a directory a size of 20 per entry, "." and ".." included: 40 is empty.
EMPTY_TMPFS_DIR_BYTES = 40
_work_dirs = ()  # (path, mode, (atime_ns, mtime_ns), is tmpfs) of each, recorded at start


def _alone():
    """True when no other process is left in the jail's pid namespace.

    As the namespace's init, the zygote inherits every orphan, so every other process
    descends from a child of the zygote: none left (``ECHILD``) means none at all.
    """
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return False


def end_all_other_processes():
    """As pid 1 of the jail: SIGKILL everything else (setsid daemons included), reap it all.

    Most jobs leave no process behind, and nothing but a process of the jail can start one:
    then there is nothing to do. ``kill(-1)`` is kept for the rest; it walks every task of
    the host (3% of the machine's CPU in a trivial-job batch with 64 slots).
    """
    if _alone():
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    reap_all()


def reap_all():
    """Waits for every child until none is left."""
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


def record_work_dirs():
    """Once, at start: each work directory's mode and times, and whether it is a tmpfs mount."""
    global _work_dirs
    with open("/proc/self/mounts") as mounts:
        tmpfs = {fields[1] for fields in map(str.split, mounts) if fields[2] == "tmpfs"}
    recorded = []
    for path in WORK_DIRS:
        found = os.stat(path)
        times = (found.st_atime_ns, found.st_mtime_ns)
        recorded.append((path, stat.S_IMODE(found.st_mode), times, path in tmpfs))
    _work_dirs = tuple(recorded)


def reset(path, mode, times, is_tmpfs):
    """Puts a work directory back as the next job must find it; fails loudly if it cannot.

    The directory belongs to the jobs' uid, so a job can change more than its contents: its
    mode (000 would fail every later job), extended attributes (data the next job could read)
    and times. All of it is restored. An empty tmpfs directory is known by its size.
    """
    found = os.stat(path)
    if stat.S_IMODE(found.st_mode) != mode:
        os.chmod(path, mode)
    for name in os.listxattr(path):
        os.removexattr(path, name)
    if not (is_tmpfs and found.st_size == EMPTY_TMPFS_DIR_BYTES):
        _remove_contents(path)
    os.utime(path, ns=times)


def _remove_contents(path):
    entries = list(os.scandir(path))
    if not entries:
        return
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                _make_tree_writable(entry.path)
                import shutil  # rarely needed, and a job zygote is smaller without it

                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass
    leftovers = os.listdir(path)
    if leftovers:
        raise RuntimeError(f"could not wipe {path}: {leftovers[:5]!r}")


def wipe_work_dirs():
    """Empties and restores every writable directory of the jail (``record_work_dirs`` first)."""
    if not _work_dirs:  # not recorded: nothing would be wiped, and no one would notice
        raise RuntimeError("record_work_dirs() must run before wipe_work_dirs()")
    for work_dir in _work_dirs:
        reset(*work_dir)
