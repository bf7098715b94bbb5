"""Hostile code against one real warm slot: contained, right status, slot serves the next job.

Every test ends with ``assert_slot_still_serves``: the same jail (same nsjail pid, no slot
failure) then runs ``print(1)`` correctly.
"""

import asyncio
import os
import socket
import time

from executor.jobs import Status
from executor.pool import SlotPool
from tests.executor.conftest import RunCode

JailPids = tuple[int | None, ...]


async def assert_slot_still_serves(run_code: RunCode, pool: SlotPool, jail_pids: JailPids) -> None:
    for tier, preload in enumerate(pool.config.tiers):  # every zygote of the slot, not one
        code = f"import {', '.join(preload)}; print(1)" if preload else "print(1)"
        assert pool.tier_for(code) == tier
        result = await run_code(code)
        assert (result.status, result.stdout) == (Status.OK, "1\n")
    assert pool.slot_failures == 0
    assert [slot.pids for slot in pool.slots()] == [jail_pids]


def jail_pids(pool: SlotPool) -> JailPids:
    """The slot's jails (one per zygote tier): the same ones must serve after each attack."""
    (slot,) = pool.slots()
    assert None not in slot.pids
    return slot.pids


async def test_cannot_reach_the_hosts_loopback_services(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    pid = jail_pids(one_slot)
    connections: list[object] = []

    async def record(_r: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(writer)
        writer.close()

    server = await asyncio.start_server(record, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = f"""
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2)
    print("CONNECTED")
except OSError as exc:
    print("refused", type(exc).__name__)
print(sorted(name for _, name in socket.if_nameindex()))
"""
    async with server:
        result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    assert "CONNECTED" not in result.stdout
    assert "['lo']" in result.stdout
    assert connections == []
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_cannot_reach_a_host_unix_socket(
    run_code: RunCode, one_slot: SlotPool, tmp_path: object
) -> None:
    pid = jail_pids(one_slot)
    path = f"/tmp/codepool-test-{os.getpid()}.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen()
    try:
        code = f"import socket\nsocket.socket(socket.AF_UNIX).connect({path!r})\nprint('CONNECTED')"
        result = await run_code(code)
    finally:
        listener.close()
        os.unlink(path)
    assert result.status == Status.ERROR
    assert "CONNECTED" not in result.stdout
    assert "FileNotFoundError" in result.stderr
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_worker_environment_does_not_reach_the_code(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    # The worker's environment at start is what the jail would inherit if it leaked.
    pid = jail_pids(one_slot)
    secret = os.environ.get("PATH", "")
    code = """
import os
print(sorted(os.environ))
zygote_env = "/proc/1/environ"
print(open(zygote_env, "rb").read() if os.access(zygote_env, os.R_OK) else "no access")
print(open("/proc/self/environ", "rb").read())
"""
    result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    assert "REDIS" not in result.stdout
    assert "PYTEST" not in result.stdout
    assert secret not in result.stdout
    assert "'HOME'" in result.stdout
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_cannot_write_outside_its_tmp(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = """
import os
refused = []
for path in ["/x", "/usr/x", "/etc/x", "/opt/codepool/x", "/proc/x", "/dev/x", "/lib/x"]:
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError:
        refused.append(path)
for path in ["/tmp/ok", "/work/ok", "/dev/shm/ok"]:
    open(path, "w").write("x")
print(len(refused), os.getuid(), os.getgid())
"""
    result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    assert "WROTE" not in result.stdout
    assert result.stdout.strip() == "7 65534 65534"
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_sees_no_host_process(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    visible = eval(result.stdout)
    assert 1 in visible and len(visible) <= 2  # the zygote and this job
    assert os.getpid() not in visible or len(visible) <= 2
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_cannot_signal_or_trace_its_parent(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = """
import ctypes, os, signal
for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGSTOP):
    try:
        os.kill(os.getppid(), sig)
    except OSError as exc:
        print("refused", exc.errno)
libc = ctypes.CDLL(None, use_errno=True)
print("ptrace", libc.ptrace(16, 1, 0, 0), ctypes.get_errno())  # PTRACE_ATTACH
print("alive")
"""
    result = await run_code(code)
    assert result.status == Status.OK, result.stderr
    assert "ptrace -1 1" in result.stdout  # EPERM from the seccomp policy
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_fork_bomb_is_contained(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    result = await run_code(code, timeout_s=2)
    assert result.status == Status.TIMEOUT
    await assert_slot_still_serves(run_code, one_slot, pid)
    leftovers = await run_code(
        "import os; print(len([p for p in os.listdir('/proc') if p.isdigit()]))"
    )
    assert leftovers.stdout == "2\n"


async def test_memory_bomb_gets_memory_limit(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    at_once = await run_code("x = bytearray(2 * 1024**3)", memory_mb=128)
    assert at_once.status == Status.MEMORY_LIMIT
    growing = await run_code("chunks = []\nwhile True: chunks.append(b'x' * 10**6)", memory_mb=128)
    assert growing.status == Status.MEMORY_LIMIT
    assert "MemoryError" in growing.stderr
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_numpy_memory_bomb_gets_memory_limit(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    result = await run_code("import numpy\nx = numpy.ones((1024, 1024, 512))", memory_mb=256)
    assert result.status == Status.MEMORY_LIMIT
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_cpu_spin_times_out(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    result = await run_code("while True: pass", timeout_s=1)
    assert result.status == Status.TIMEOUT
    assert 0.2 < result.cpu_s < 3.0  # it spun (the machine may be shared)
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_sleeping_past_the_limit_times_out_and_keeps_partial_output(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    pid = jail_pids(one_slot)
    started = time.monotonic()
    result = await run_code("import time\nprint('before')\ntime.sleep(60)", timeout_s=1)
    assert result.status == Status.TIMEOUT
    assert result.stdout == "before\n"
    assert time.monotonic() - started < 5
    assert result.cpu_s < 0.5  # sleeping does not hold a core
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_output_flood_is_cut_with_head_and_tail(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    pid = jail_pids(one_slot)
    code = "import sys\nsys.stdout.write('H' * 1000)\nfor _ in range(100):\n    print('x' * 10**6)"
    result = await run_code(code)
    assert result.status == Status.OUTPUT_LIMIT
    assert result.stdout_truncated
    assert result.stdout.startswith("H" * 1000)
    assert "bytes truncated" in result.stdout
    assert len(result.stdout) < 2 * one_slot.settings.output_cap_bytes
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_a_setsid_daemon_does_not_outlive_its_job(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    pid = jail_pids(one_slot)
    code = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(1.5)
        open("/tmp/daemon-was-here", "w").write("x")
        print("DAEMON OUTPUT")
        time.sleep(60)
    os._exit(0)
print("parent done")
"""
    result = await run_code(code)
    assert result.status == Status.OK
    assert result.stdout == "parent done\n"
    await asyncio.sleep(2.0)
    check = await run_code(
        "import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]), "
        "os.path.exists('/tmp/daemon-was-here'))"
    )
    assert check.stdout == "2 False\n"
    assert "DAEMON" not in check.stdout
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_files_left_behind_are_wiped(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = """
import os
for d in ("/tmp", "/work", "/dev/shm"):
    os.makedirs(d + "/deep/er", exist_ok=True)
    open(d + "/deep/er/f", "w").write("secret")
    open(d + "/.hidden", "w").write("secret")
    os.chmod(d + "/deep/er", 0)
    os.chmod(d + "/deep", 0)
print("left")
"""
    assert (await run_code(code)).stdout == "left\n"
    check = await run_code(
        "import os; print([os.listdir(d) for d in ('/tmp', '/work', '/dev/shm')])"
    )
    assert check.stdout == "[[], [], []]\n"
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_huge_stdin(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    data = ("0123456789" * 100 + "\n") * 8000  # 8 MB
    read = await run_code("import sys; print(len(sys.stdin.read()))", stdin=data)
    assert (read.status, read.stdout) == (Status.OK, f"{len(data)}\n")
    ignored = await run_code("print('did not read')", stdin=data)
    assert (ignored.status, ignored.stdout) == (Status.OK, "did not read\n")
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_non_utf8_output(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = (
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfeok\\n')\n"
        "sys.stderr.buffer.write(b'\\xc3(\\n')"
    )
    result = await run_code(code)
    assert result.status == Status.OK
    assert result.stdout == "\ufffd\ufffdok\n"
    assert result.stderr == "\ufffd(\n"
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_namespace_syscalls_are_refused(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000), ctypes.get_errno())  # CLONE_NEWUSER
print(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None), ctypes.get_errno())
"""
    result = await run_code(code)
    assert result.stdout == "-1 1\n-1 1\n"
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_process_file_and_descriptor_limits(run_code: RunCode, one_slot: SlotPool) -> None:
    pid = jail_pids(one_slot)
    settings = one_slot.settings
    many_files = await run_code("fs = [open('/dev/null') for _ in range(100000)]")
    assert many_files.status == Status.ERROR
    assert "Too many open files" in many_files.stderr
    big_file = await run_code(
        f"open('/tmp/big', 'wb').write(b'x' * {settings.max_file_size_mb + 1} * 2**20)"
    )
    assert big_file.status == Status.ERROR
    assert "File too large" in big_file.stderr
    code = f"""
import os, time
kids = 0
try:
    for _ in range({settings.max_processes * 2}):
        if os.fork() == 0:
            time.sleep(30)
        kids += 1
except OSError as exc:
    print("stopped", kids, exc.errno)
"""
    processes = await run_code(code, timeout_s=3)
    assert processes.status == Status.OK, processes.stderr
    _, kids, errno = processes.stdout.split()
    assert int(kids) < settings.max_processes and errno == "11"  # EAGAIN
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_scribbling_on_the_zygotes_pipes_only_changes_its_own_result(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    # The report pipe is open in the job (its child writes the report after the code): a job
    # may write garbage on it, and on every other descriptor it finds. Its result then comes
    # from its exit status; the slot and the next job are not affected.
    pid = jail_pids(one_slot)
    code = """
import os
for fd in range(3, 64):
    try:
        os.write(fd, b"\\x00\\x00\\x00\\x05garbage")
    except OSError:
        pass
print("wrote")
raise SystemExit(3)
"""
    result = await run_code(code)
    assert (result.status, result.exit_code, result.stdout) == (Status.ERROR, 3, "wrote\n")
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_a_job_cannot_lock_the_next_one_out_of_its_work_dirs(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    # The work directories belong to the jobs' uid: a job can chmod them.
    pid = jail_pids(one_slot)
    locked = await run_code(
        "import os\nfor d in ('/work', '/tmp', '/dev/shm'):\n    os.chmod(d, 0)\nprint('locked')"
    )
    assert locked.stdout == "locked\n"
    code = """
import os
for d in ('/work', '/tmp', '/dev/shm'):
    open(d + '/f', 'w').write('x')
print(os.getcwd(), oct(os.stat('/work').st_mode & 0o7777))
"""
    after = await run_code(code)
    assert (after.status, after.stdout) == (Status.OK, "/work 0o1777\n"), after.stderr
    await assert_slot_still_serves(run_code, one_slot, pid)


async def test_what_a_job_sets_on_its_work_dirs_does_not_reach_the_next(
    run_code: RunCode, one_slot: SlotPool
) -> None:
    # Extended attributes (ACLs included) and times of the directories themselves are data
    # a job could leave for the next one: they are removed and reset between jobs.
    dirs = "('/work', '/tmp', '/dev/shm')"
    before = await run_code(f"import os; print([os.stat(d).st_mtime_ns for d in {dirs}])")
    leave = f"""
import os
for d in {dirs}:
    os.setxattr(d, 'user.secret', b'from the previous job')
    os.utime(d, ns=(123456789, 123456789))
print('left')
"""
    assert (await run_code(leave)).stdout == "left\n"
    look = (f"import os; print([os.listxattr(d) for d in {dirs}]); "
            f"print([os.stat(d).st_mtime_ns for d in {dirs}])")  # fmt: skip
    seen = await run_code(look)
    assert seen.stdout == f"[[], [], []]\n{before.stdout}", seen.stderr
