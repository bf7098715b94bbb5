"""The zygote's fork: the C call alone, without Python's at-fork hooks, when that is safe.

``os.fork()`` runs, in every child, each hook registered with ``os.register_at_fork``. With
numpy or the full stack preloaded these are threading's, random's and logging's: Python code
that touches, and so copies on write, ~180 of the zygote's pages. Measured on this project's
VM: 1.2-1.8 ms of each job's CPU, more than the fork itself (0.5-1 ms).

Those hooks repair what other threads left half-changed at the fork (held locks, thread
tables) and reseed ``random``. A zygote with a single thread has nothing to repair, so it
calls libc's ``fork`` directly (through ``ctypes.PyDLL``, which keeps the GIL held, as
``os.fork`` does) and reseeds the generators itself, in the parent, before each fork
(``reseed_generators``). A zygote that has more than one thread (a preloaded module started
one) uses ``os.fork`` with its hooks.
"""

import ctypes
import os
import sys

SEED_BYTES = 32


def reseed_generators():
    """Fresh state for the global generators that a child would otherwise inherit.

    Done in the zygote before each fork: in the child it would copy the generators' pages on
    write (numpy's ~120 of them). ``random`` is reseeded by its at-fork hook only when
    ``os.fork`` is used; numpy's global state is never reseeded by anything else.

    Only generators already loaded are reseeded. numpy loads ``numpy.random`` on first use,
    and a zygote that loads it for nothing maps 61 more regions (its extension modules,
    OpenSSL through ``secrets``): 0.5 ms more fork and exit for every job on this VM, against
    13 ms for the job that imports it itself (seeded then from the OS, fresh by itself).
    """
    random = sys.modules.get("random")
    if random is not None:
        random.seed()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        # 256 bits from the OS through MT19937's init_by_array, in C: 23 us. A bare seed()
        # derives the state through a SeedSequence in Python: 240 us of every numpy job.
        numpy = sys.modules["numpy"]
        numpy_random.seed(numpy.frombuffer(os.urandom(SEED_BYTES), numpy.uint32))


def _thread_count():
    return len(os.listdir("/proc/self/task"))


def choose_fork():
    """The fork to use from now on: libc's when this process has one thread, else ``os.fork``.

    Called once the zygote has preloaded its modules; the zygote starts no thread after that.
    """
    if _thread_count() != 1:
        return os.fork
    libc_fork = ctypes.PyDLL(None, use_errno=True).fork
    libc_fork.restype = ctypes.c_int
    libc_fork.argtypes = []

    def fork_without_hooks():
        pid = libc_fork()
        if pid < 0:
            errno = ctypes.get_errno()
            raise OSError(errno, os.strerror(errno))
        return pid

    return fork_without_hooks
