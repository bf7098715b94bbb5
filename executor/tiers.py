"""Which of a slot's zygotes a job forks from: the lightest that has what its code needs.

Forking a zygote and tearing the child down cost time in proportion to the zygote's memory
(on this VM: 0.8 ms for a bare interpreter, 1.7 ms with numpy, 12 ms with numpy, sympy, scipy
and math-verify). Most tool calls print or do arithmetic, so each slot keeps lighter zygotes
too and a job goes to the lightest one whose preload covers the modules its code names.

The choice reads the code's text, never runs it, and can only cost speed, not correctness:
a job sent too light imports what it lacks itself (as ``__import__("sympy")`` does).
"""

import re
import sys
from collections.abc import Sequence

# `import a.b as c, d` and `from a.b import c` at a statement start (or after `;`).
_IMPORT = re.compile(
    r"(?:^|;)[ \t]*(?:import[ \t]+([^\n;#]+)|from[ \t]+([\w.]+)[ \t]+import)", re.M
)


def imported_roots(code: str) -> set[str]:
    """Top-level names of the modules ``code`` imports with absolute import statements."""
    roots: set[str] = set()
    for names, module in _IMPORT.findall(code):
        for entry in names.split(",") if names else (module,):
            words = entry.split()  # "numpy.linalg as la" -> "numpy"
            root = words[0].split(".")[0].strip("()") if words else ""
            if root.isidentifier():
                roots.add(root)
    return roots


class TierRouter:
    """Maps code to the index of the zygote tier to run it in (0 = lightest)."""

    def __init__(self, tiers: Sequence[Sequence[str]]) -> None:
        if not tiers:
            raise ValueError("at least one zygote tier is needed")
        self._tiers = [frozenset(tier) for tier in tiers]
        self._known = frozenset().union(*self._tiers)
        names = sorted(self._known, key=len, reverse=True)
        self._mention = (
            re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b") if names else None
        )

    @property
    def count(self) -> int:
        """How many tiers there are."""
        return len(self._tiers)

    def tier_for(self, code: str) -> int:
        """The lightest tier whose preload has every preloaded module the code names.

        Code that imports a third-party module no tier preloads goes to the heaviest tier:
        such modules usually stand on the scientific stack.
        """
        last = len(self._tiers) - 1
        if last == 0:
            return 0
        unknown = imported_roots(code) - self._known - sys.stdlib_module_names
        if unknown:
            return last
        needed = set(self._mention.findall(code)) if self._mention else set()
        for index, tier in enumerate(self._tiers):
            if needed <= tier:
                return index
        return last
