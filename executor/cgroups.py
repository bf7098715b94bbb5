"""Cgroup backend for the jails: v1 or v2 where the host lets us, rlimits only otherwise."""

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids")
JAIL_CGROUP_PREFIX = "NSJAIL."  # nsjail names each jail's cgroup after its jailed process's pid


@dataclass(frozen=True)
class CgroupBackend:
    """Where nsjail creates each jail's cgroup; ``kind == "off"`` means rlimits only."""

    kind: Literal["v1", "v2", "off"]
    parent: str = ""
    v2_mount: Path | None = None
    reason: str = ""


def remove_stale_jail_cgroups(parent: Path) -> int:
    """Removes the cgroups of jails whose process is gone; returns how many.

    nsjail removes a jail's cgroup when it exits, but not when it is killed (a worker that
    dies takes its jails down with SIGKILL): their empty cgroups would pile up under
    ``parent``. A cgroup whose process still runs is kept, and the kernel refuses to remove
    one that holds any process, so a live jail's cgroup is never touched.
    """
    removed = 0
    for path in parent.glob(JAIL_CGROUP_PREFIX + "*"):
        pid = path.name.removeprefix(JAIL_CGROUP_PREFIX)
        if not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        try:
            path.rmdir()
            removed += 1
        except OSError as exc:  # gone meanwhile, or not empty after all
            log.debug("kept %s: %s", path, exc)
    if removed:
        log.info("removed %d stale jail cgroup(s) under %s", removed, parent)
    return removed


def _prepare_v1(parent: str) -> CgroupBackend:
    for controller in V1_CONTROLLERS:
        path = CGROUP_ROOT / controller / parent
        path.mkdir(exist_ok=True)
        if not os.access(path, os.W_OK):
            raise PermissionError(f"{path} is not writable")
        remove_stale_jail_cgroups(path)
    return CgroupBackend("v1", parent=parent)


def _prepare_v2(parent: str) -> CgroupBackend:
    """Delegates a subtree of our own cgroup: we move into a leaf, jails go under ``parent``.

    The "no internal processes" rule forbids enabling controllers for children of a cgroup
    that holds processes, so the worker first moves itself into a leaf of its own.
    """
    own = Path(Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1].lstrip("/"))
    base = CGROUP_ROOT / own
    leaf = base / "codepool-worker"
    leaf.mkdir(exist_ok=True)
    for pid in (base / "cgroup.procs").read_text().split():
        (leaf / "cgroup.procs").write_text(pid)
    (base / "cgroup.subtree_control").write_text("+memory +pids")
    jails = base / parent
    jails.mkdir(exist_ok=True)
    (jails / "cgroup.subtree_control").write_text("+memory +pids")
    remove_stale_jail_cgroups(jails)
    return CgroupBackend("v2", v2_mount=jails)


def detect(mode: Literal["auto", "v1", "v2", "off"], parent: str) -> CgroupBackend:
    """Prepares the backend ``mode`` asks for; ``auto`` falls back to rlimits with a reason."""
    if mode == "off":
        return CgroupBackend("off", reason="disabled by settings")
    is_v2 = (CGROUP_ROOT / "cgroup.controllers").exists()
    kind = mode if mode != "auto" else ("v2" if is_v2 else "v1")
    try:
        return _prepare_v2(parent) if kind == "v2" else _prepare_v1(parent)
    except OSError as exc:
        if mode != "auto":
            raise
        log.warning("cgroup %s unavailable, limits fall back to rlimits: %s", kind, exc)
        return CgroupBackend("off", reason=f"cgroup {kind} unavailable: {exc}")
