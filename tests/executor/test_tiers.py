"""Zygote tiers: which zygote a job forks from, and that every tier runs what it is sent."""

import platform
from pathlib import Path

import pytest

from executor.jobs import Status
from executor.limits import JobLimits, SandboxJob
from executor.pool import SlotPool
from executor.settings import SandboxSettings
from executor.tiers import TierRouter, imported_roots
from tests.executor.conftest import RunCode

FULL = ("numpy", "sympy", "scipy", "math_verify")
ROUTER = TierRouter([(), ("numpy",), FULL])


@pytest.mark.parametrize(
    ("code", "roots"),
    [
        ("import os", {"os"}),
        ("import numpy as np, sympy.ntheory as nt", {"numpy", "sympy"}),
        ("from scipy.optimize import minimize", {"scipy"}),
        ("x = 1; import math", {"math"}),
        ("def f():\n    from fractions import Fraction\n", {"fractions"}),
        ("from . import sibling", set()),
        ("print('import os')", set()),
    ],
)
def test_imported_roots(code: str, roots: set[str]) -> None:
    assert imported_roots(code) == roots


@pytest.mark.parametrize(
    ("code", "tier"),
    [
        ("print(1+1)", 0),
        ("import math, itertools, time; time.sleep(0.1)", 0),
        ("import numpy as np; print(np.eye(2))", 1),
        ("from numpy.linalg import det", 1),
        ("import sympy; print(sympy.factorint(10))", 2),
        ("import numpy\nfrom scipy import optimize", 2),
        ("m = __import__('math_verify')", 2),  # named, if not imported by a statement
        ("import networkx", 2),  # third party, preloaded nowhere: stands on the full stack
        ("x = (", 0),  # does not parse: fails the same everywhere, so the cheapest
    ],
)
def test_the_lightest_tier_that_covers_the_code(code: str, tier: int) -> None:
    assert ROUTER.tier_for(code) == tier


def test_a_single_tier_takes_everything() -> None:
    assert TierRouter([FULL]).tier_for("import sympy") == 0
    assert TierRouter([()]).tier_for("import sympy") == 0


def test_only_proper_subsets_of_the_preload_become_lighter_tiers() -> None:
    settings = SandboxSettings(
        slots=1, preload_modules=["numpy", "sympy"], lighter_preloads=[[], ["scipy"], ["numpy"]]
    )
    assert settings.zygote_tiers() == ((), ("numpy",), ("numpy", "sympy"))
    assert SandboxSettings(slots=1, preload_modules=[]).zygote_tiers() == ((),)
    assert SandboxSettings(slots=1, lighter_preloads=[]).zygote_tiers() == (FULL,)


async def test_each_job_runs_in_the_zygote_of_its_tier(run_code: RunCode) -> None:
    # The probe spells the names in pieces: naming a module is enough to route to its tier.
    probe = (
        "print(sorted(m for m in ('num' + 'py', 'sym' + 'py', 'sci' + 'py') if m in sys.modules))"
    )
    light = await run_code(f"import sys; {probe}")
    numeric = await run_code(f"import sys, numpy; {probe}")
    full = await run_code(f"import sys, sympy; {probe}")
    assert light.stdout == "[]\n"
    assert numeric.stdout == "['numpy']\n"
    assert full.stdout == "['numpy', 'scipy', 'sympy']\n"


async def test_code_sent_too_light_still_runs(run_code: RunCode) -> None:
    # An import the router cannot see (built at run time) happens in the job itself.
    result = await run_code("m = __import__('sym' + 'py'); print(m.factorint(12))")
    assert (result.status, result.stdout) == (Status.OK, "{2: 2, 3: 1}\n")


def _kernel_can_collapse() -> bool:
    """MADV_COLLAPSE needs Linux 6.1+ and transparent huge pages not set to ``never``."""
    major, minor = (int(part) for part in platform.release().split(".")[:2])
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    return (major, minor) >= (6, 1) and thp.exists() and "[never]" not in thp.read_text()


async def test_the_full_zygotes_heap_is_in_huge_pages(sandbox_settings: SandboxSettings) -> None:
    settings = sandbox_settings.model_copy(update={"slots": 1})
    pool = SlotPool(settings)
    await pool.start()
    plain = SlotPool(settings.model_copy(update={"huge_pages": False}))
    await plain.start()
    try:
        (slot,) = pool.slots()
        full = slot.zygotes[-1]
        if _kernel_can_collapse():
            assert full.huge_pages >= 8  # 22 here: 44 of its ~56 MiB heap
        else:
            assert full.huge_pages == 0
        assert [z.huge_pages for z in plain.slots()[0].zygotes] == [0, 0, 0]
        # Same answers either way.
        code = "import sympy; print(sympy.factorint(2**32 + 1))"
        job = SandboxJob(code, JobLimits.resolve(settings))
        assert (
            (await pool.run(job)).stdout
            == (await plain.run(job)).stdout
            == "{641: 1, 6700417: 1}\n"
        )
    finally:
        await pool.stop()
        await plain.stop()
