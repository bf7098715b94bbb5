"""Stages the ``executor.jail`` package where the jailed, unprivileged interpreter can read it.

The checkout may live where the sandbox's outside uid cannot read (under a 0700 home, say),
so each pool copies the package into a fresh world-readable directory that the jail binds
read-only at ``JAIL_CODE_DIR``.
"""

import shutil
import tempfile
from importlib import resources
from pathlib import Path

JAIL_CODE_DIR = Path("/opt/codepool-jail")
PACKAGE = "jail"

# Runs as ``python -I -c BOOTSTRAP <config json>`` inside the jail.
BOOTSTRAP = (
    f"import sys; sys.path.insert(0, {str(JAIL_CODE_DIR)!r}); "
    f"from {PACKAGE}.zygote import main; main()"
)


class StagedJailCode:
    """A world-readable copy of the jail package; ``close`` removes it."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="codepool-jail-"))
        self.root.chmod(0o755)
        source = resources.files("executor").joinpath(PACKAGE)
        target = self.root / PACKAGE
        target.mkdir(mode=0o755)
        for entry in source.iterdir():
            if entry.name.endswith(".py"):
                copied = target / entry.name
                copied.write_text(entry.read_text())
                copied.chmod(0o644)

    def __enter__(self) -> "StagedJailCode":
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Removes the copy (the pool's jails must be stopped first)."""
        shutil.rmtree(self.root, ignore_errors=True)
