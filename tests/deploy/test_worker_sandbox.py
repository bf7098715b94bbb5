"""The worker's pod settings against the real jail, in a container-like /proc on this host.

A container runtime masks parts of /proc; the kernel then refuses the fresh procfs that nsjail
mounts in a new user namespace. Here a private mount and pid namespace masks /proc the same
way, the process keeps exactly the capabilities the rendered worker Deployment grants, and
deploy/entrypoint.sh starts a stand-in for `codepool worker` that runs real jobs in a slot.
Not simulated: read-only cgroupfs (this host has cgroup v1), seccomp and AppArmor profiles.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deploy.check.steps import tool
from tests.conftest import unique_uid_base
from tests.deploy.conftest import REPO

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("setpriv")),
    reason="needs root, unshare and setpriv",
)

JOBS = """
import asyncio, json
from executor.limits import JobLimits, SandboxJob
from executor.pool import SlotPool
from executor.settings import SandboxSettings

async def main():
    settings = SandboxSettings(slots=1, uid_base={uid_base}, preload_modules=[],
                               default_memory_mb=256, max_memory_mb=512)
    pool = SlotPool(settings)
    await pool.start()
    try:
        jobs = {{"ok": "print(len(open('/proc/self/status').read()) > 0)",
                "memory": "x = bytearray(400 * 2**20); x[::4096] = b'1' * len(x[::4096])"}}
        out = {{}}
        for name, code in jobs.items():
            limits = JobLimits.resolve(settings, memory_mb=128)
            out[name] = (await pool.run(SandboxJob(code, limits, "", {{}}, False))).status
        print("RESULT " + json.dumps(out))
    finally:
        await pool.stop()

asyncio.run(main())
"""

# Inside new mount and pid namespaces: a fresh /proc masked as runc masks it, then the command.
CONTAINER_PROC = """
set -e
umount -l /proc
mount -t proc proc /proc
for p in /proc/keys /proc/timer_list /proc/latency_stats /proc/sched_debug; do
    [ -e "$p" ] && mount --bind /dev/null "$p"
done
mount --bind /proc/sys /proc/sys && mount -o remount,bind,ro /proc/sys
exec "$@"
"""


def worker_capabilities() -> list[str]:
    """The capabilities the rendered base grants the worker container."""
    kubectl = tool("kubectl")
    assert kubectl, "kubectl not found: run scripts/setup.sh test"
    rendered = subprocess.run(
        [kubectl, "kustomize", str(REPO / "k8s/base")], capture_output=True, text=True, check=True
    ).stdout
    worker = next(
        d for d in yaml.safe_load_all(rendered)
        if d and d["kind"] == "Deployment" and d["metadata"]["name"] == "worker"
    )  # fmt: skip
    return list(
        worker["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"][
            "add"
        ]
    )


def run_worker(tmp_path: Path, capabilities: list[str], *, entrypoint: bool) -> str:
    """Runs the job script as `codepool worker` would start, in a masked-/proc namespace."""
    (tmp_path / "jobs.py").write_text(JOBS.format(uid_base=unique_uid_base() + 50))
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "codepool").write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'jobs.py'}\n")
    (fake_bin / "codepool").chmod(0o755)
    bounding = ",".join(["-all", *(f"+{c.lower()}" for c in capabilities)])
    start = (
        ["sh", str(REPO / "deploy/entrypoint.sh"), "worker"]
        if entrypoint
        else ["codepool", "worker"]
    )
    argv = [
        "unshare", "--mount", "--pid", "--fork", "--propagation", "private",
        "sh", "-c", CONTAINER_PROC, "container-proc",
        "setpriv", "--inh-caps=-all", f"--bounding-set={bounding}", "--", *start,
    ]  # fmt: skip
    env = {
        **os.environ,
        "PATH": f"{fake_bin}:{os.environ['PATH']}",
        "CODEPOOL_RUN_DIR": str(tmp_path / "run"),
    }
    done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=90)
    return done.stdout + done.stderr


def results(output: str) -> dict[str, str]:
    """The statuses the job script printed, or {} if it never got that far."""
    line = next((x for x in output.splitlines() if x.startswith("RESULT ")), None)
    return json.loads(line.removeprefix("RESULT ")) if line else {}


def test_the_worker_runs_jobs_with_exactly_its_capabilities(tmp_path: Path) -> None:
    output = run_worker(tmp_path, worker_capabilities(), entrypoint=True)
    assert results(output) == {"ok": "ok", "memory": "memory_limit"}, output


def test_without_the_entrypoint_a_masked_proc_stops_the_jail(tmp_path: Path) -> None:
    """The control: the simulation reproduces the container's problem the entrypoint solves."""
    output = run_worker(tmp_path, worker_capabilities(), entrypoint=False)
    assert not results(output), output
    assert "Failed to mount mandatory point: '/proc'" in output


def test_without_setuid_the_jail_cannot_map_its_uid(tmp_path: Path) -> None:
    """The control for the capability set: taking one away is felt."""
    capabilities = [c for c in worker_capabilities() if c != "SETUID"]
    output = run_worker(tmp_path, capabilities, entrypoint=True)
    assert not results(output), output
    assert "uid_map" in output
