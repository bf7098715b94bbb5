"""The slot pool: concurrency, recycling, recovery from a dead jail, fresh mode, refusal."""

import asyncio
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from executor import cgroups
from executor.jail_process import SlotConfig
from executor.jobs import Status
from executor.limits import MIB, JobLimits, SandboxJob
from executor.nsjail import SandboxUnavailable
from executor.pool import SlotPool
from executor.settings import SandboxSettings
from executor.slot import Slot


def job(settings: SandboxSettings, code: str, timeout_s: float | None = None) -> SandboxJob:
    return SandboxJob(code, JobLimits.resolve(settings, timeout_s=timeout_s))


async def wait_until(predicate: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Polls state the pool exposes (it has no events to wait on)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)


def host_uids_of(pid: int) -> set[int]:
    """Real uids of ``pid`` and all its descendants, read from the host's /proc."""
    uids: set[int] = set()
    children = {pid}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["PPid"]) in children or int(entry.name) in children:
            children.add(int(entry.name))
            uids.add(int(fields["Uid"].split()[0]))
    return uids


async def test_concurrent_jobs_cannot_see_each_other(sandbox_settings: SandboxSettings) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 2}))
    await pool.start()
    try:
        code = (
            "import os, time\ntime.sleep(0.5)\n"
            "print(sorted(p for p in os.listdir('/proc') if p.isdigit()))"
        )
        first, second = await asyncio.gather(
            pool.run(job(sandbox_settings, code)), pool.run(job(sandbox_settings, code))
        )
        assert first.stdout == second.stdout == "['1', '2']\n"  # the zygote and this job only
    finally:
        await pool.stop()


async def test_jailed_processes_run_as_unprivileged_outside_uids(
    sandbox_settings: SandboxSettings,
) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 2}))
    await pool.start()
    try:
        running = asyncio.gather(
            *(pool.run(job(sandbox_settings, "import time; time.sleep(1)")) for _ in range(2))
        )
        await asyncio.sleep(0.5)
        uids = set()
        for slot in pool.slots():
            for pid in slot.pids:  # a slot's zygotes (one jail per tier) share its uid
                assert pid is not None
                uids |= host_uids_of(pid) - {0}  # the nsjail supervisor itself is root
        assert uids == {sandbox_settings.uid_base, sandbox_settings.uid_base + 1}
        assert all(r.status == Status.OK for r in await running)
    finally:
        await pool.stop()


async def test_sleeping_jobs_do_not_hold_cores(sandbox_settings: SandboxSettings) -> None:
    slots = 8
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": slots}))
    await pool.start()
    try:
        started = time.monotonic()
        results = await asyncio.gather(
            *(pool.run(job(sandbox_settings, "import time; time.sleep(1)")) for _ in range(slots))
        )
        elapsed_s = time.monotonic() - started
        assert all(r.status == Status.OK for r in results)
        assert elapsed_s < 3.0  # 8 one-second sleeps on a 2-core machine: concurrent, not queued
    finally:
        await pool.stop()


async def test_zygotes_are_recycled_after_k_jobs(sandbox_settings: SandboxSettings) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 1, "recycle_after_jobs": 2}))
    await pool.start()
    try:
        (slot,) = pool.slots()
        first = slot.pids
        for _ in range(5):
            result = await pool.run(job(sandbox_settings, "print('ok')"))
            assert result.stdout == "ok\n"
        assert pool.restarts >= 2
        assert pool.slot_failures == 0
        # Only the zygote that ran the jobs (the bare one) was restarted.
        assert slot.pids[0] != first[0]
        assert slot.pids[1:] == first[1:]
    finally:
        await pool.stop()


def test_recycling_is_spread_so_slots_do_not_restart_together() -> None:
    config = SlotConfig(
        binary=Path("/bin/true"), python=Path("/bin/true"), jail_code=Path("/"),
        cgroup=cgroups.detect("off", "codepool"), tiers=((), ("numpy",)), huge_pages=False,
        memory_limit_bytes=MIB, pids_limit=8, start_timeout_s=1.0, kill_grace_s=1.0,
    )  # fmt: skip
    points = [at for i in range(8) for at in Slot(i, 1000 + i, config, 1000).recycle_at]
    assert all(1000 <= at < 1250 for at in points)
    assert len(set(points)) > 1
    assert Slot(0, 1000, config, 2).recycle_at == [2, 2]  # small counts stay exact


async def test_a_jail_killed_mid_job_is_replaced_and_the_job_retried(
    sandbox_settings: SandboxSettings,
) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 1}))
    await pool.start()
    try:
        (slot,) = pool.slots()
        code = "import time; time.sleep(2); print('done')"
        jail_pid = slot.pids[pool.tier_for(code)]
        assert jail_pid is not None
        running = asyncio.create_task(pool.run(job(sandbox_settings, code)))
        await wait_until(lambda: slot.busy)
        os.kill(jail_pid, signal.SIGKILL)
        result = await running
        assert (result.status, result.stdout) == (Status.OK, "done\n")
        assert pool.slot_failures == 1
        after = await pool.run(job(sandbox_settings, "print(1)"))
        assert after.stdout == "1\n"
    finally:
        await pool.stop()


async def test_a_job_that_breaks_two_jails_gets_sandbox_error(
    sandbox_settings: SandboxSettings,
) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 1}))
    await pool.start()

    code = "import time; time.sleep(9)"

    async def kill_jails() -> None:
        for _ in range(2):
            await wait_until(lambda: any(slot.busy for slot in pool.slots()))
            (slot,) = pool.slots()
            jail_pid = slot.pids[pool.tier_for(code)]
            assert jail_pid is not None
            os.kill(jail_pid, signal.SIGKILL)
            await wait_until(lambda: not slot.busy)  # noqa: B023 - this iteration's slot

    try:
        killer = asyncio.create_task(kill_jails())
        # Long enough that the second kill lands while it runs, even on a loaded machine.
        result = await pool.run(job(sandbox_settings, code, timeout_s=10))
        await killer
        assert result.status == Status.SANDBOX_ERROR
        assert result.status.retry_safe
        assert pool.slot_failures == 2
        assert (await pool.run(job(sandbox_settings, "print(1)"))).stdout == "1\n"
    finally:
        await pool.stop()


async def test_fresh_isolation_runs_each_job_in_a_new_jail(
    sandbox_settings: SandboxSettings,
) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"isolation": "fresh", "slots": 2}))
    await pool.start()
    try:
        first = await pool.run(
            job(sandbox_settings, "open('/tmp/f', 'w').write('x'); import os; print(os.getuid())")
        )
        second = await pool.run(
            job(
                sandbox_settings,
                "import os, sys; print(os.path.exists('/tmp/f'), 'numpy' in sys.modules)",
            )
        )
        assert (first.status, first.stdout) == (Status.OK, "65534\n")
        assert second.stdout == "False False\n"  # nothing preloaded, nothing left
        spin = await pool.run(job(sandbox_settings, "while True: pass", timeout_s=1))
        assert spin.status == Status.TIMEOUT
    finally:
        await pool.stop()


async def test_refuses_to_start_without_a_working_sandbox(
    sandbox_settings: SandboxSettings,
) -> None:
    broken = sandbox_settings.model_copy(
        update={"python": Path("/nonexistent/venv/bin/python3"), "slots": 1}
    )
    with pytest.raises(SandboxUnavailable, match="did not start"):
        await SlotPool(broken).start()


async def test_refuses_a_missing_preload_module(sandbox_settings: SandboxSettings) -> None:
    broken = sandbox_settings.model_copy(
        update={"preload_modules": ["no_such_module_xyz"], "slots": 1}
    )
    with pytest.raises(SandboxUnavailable, match="no_such_module_xyz"):
        await SlotPool(broken).start()


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()]


def _cgroup_limits(pid: int, kind: str) -> tuple[int, int]:
    """The memory and pids limits of ``pid``'s cgroup(s)."""
    lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    paths = {c: p for _, cs, p in (line.split(":", 2) for line in lines) for c in cs.split(",")}
    if kind == "v1":
        memory = Path("/sys/fs/cgroup/memory") / paths["memory"].lstrip("/")
        pids = Path("/sys/fs/cgroup/pids") / paths["pids"].lstrip("/")
        return (int((memory / "memory.limit_in_bytes").read_text()),
                int((pids / "pids.max").read_text()))  # fmt: skip
    group = Path("/sys/fs/cgroup") / paths[""].lstrip("/")
    return int((group / "memory.max").read_text()), int((group / "pids.max").read_text())


async def test_jails_get_cgroup_memory_and_pids_limits(sandbox_settings: SandboxSettings) -> None:
    pool = SlotPool(sandbox_settings.model_copy(update={"slots": 1}))
    await pool.start()
    try:
        config = pool.config
        if config.cgroup.kind == "off":
            pytest.fail(f"this host should allow cgroups: {config.cgroup.reason}")
        (slot,) = pool.slots()
        assert len(slot.pids) == len(config.tiers) == 3  # light, numpy, full
        for jail_pid in slot.pids:
            assert jail_pid is not None
            (zygote,) = _children(jail_pid)
            memory_limit, pids_limit = _cgroup_limits(zygote, config.cgroup.kind)
            assert memory_limit == config.memory_limit_bytes
            assert pids_limit == config.pids_limit
    finally:
        await pool.stop()


def _jail_cgroup_parents(kind: str, cgroup: cgroups.CgroupBackend) -> list[Path]:
    if kind == "v1":
        return [cgroups.CGROUP_ROOT / c / cgroup.parent for c in cgroups.V1_CONTROLLERS]
    assert cgroup.v2_mount is not None
    return [cgroup.v2_mount]


def test_cgroups_of_killed_jails_are_removed(sandbox_settings: SandboxSettings) -> None:
    # A jail whose nsjail was SIGKILLed leaves its empty cgroup behind; the next start
    # removes it, and leaves alone the cgroup of a process that still runs.
    backend = cgroups.detect(sandbox_settings.cgroup, sandbox_settings.cgroup_parent)
    if backend.kind == "off":
        pytest.fail(f"this host should allow cgroups: {backend.reason}")
    parents = _jail_cgroup_parents(backend.kind, backend)
    dead_pid = 2**22 + 7  # above the largest pid_max Linux allows: no process can have it
    stale = [parent / f"NSJAIL.{dead_pid}" for parent in parents]
    alive = [parent / f"NSJAIL.{os.getpid()}" for parent in parents]
    try:
        for path in (*stale, *alive):
            path.mkdir()
        cgroups.detect(sandbox_settings.cgroup, sandbox_settings.cgroup_parent)
        assert [path.exists() for path in stale] == [False] * len(stale)
        assert [path.exists() for path in alive] == [True] * len(alive)
    finally:
        for path in (*stale, *alive):
            if path.exists():
                path.rmdir()
