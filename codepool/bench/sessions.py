"""``codepool bench sessions``: a 10-cell trajectory through sessions vs replaying earlier cells.

The replay approach is what the rStar2-Agent release does for a notebook-style tool: each call
re-runs every earlier cell in a fresh job (output of the earlier cells suppressed), so work
grows as O(n^2), random values change between calls and side effects repeat. Both approaches
run the same cells, on the same service, in the same run.
"""

import asyncio
import time
from dataclasses import dataclass

import httpx
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

CELLS = [
    "import sympy as sp\nx, y = sp.symbols('x y')",
    "import random\nseed_value = random.random()\nseed_value",
    "poly = sp.expand((x + 2*y + 1)**12)\nlen(poly.args)",
    "roots = sp.solve(x**3 - 6*x**2 + 11*x - 6, x)\nroots",
    "import numpy as np\nm = np.random.default_rng(7).random((200, 200))\n"
    "round(float(np.linalg.det(m @ m.T)) ** 0.01, 6)",
    "def f(n):\n    return sum(k * k for k in range(n))\nf(10**5)",
    "series = sp.series(sp.sin(x) / x, x, 0, 12)\nseries",
    "primes = list(sp.primerange(1, 20000))\nlen(primes)",
    "integral = sp.integrate(sp.exp(-x**2) * x**3, (x, 0, sp.oo))\nintegral",
    "seed_value",
]
console = Console(width=120)


@dataclass
class Outcome:
    """One approach's totals over all trajectories."""

    label: str
    wall_s: float
    cpu_s: float
    calls: int
    errors: int
    consistent: int  # trajectories whose last cell saw the same random value as cell 2


async def _session_trajectory(client: httpx.AsyncClient) -> tuple[float, int, bool]:
    created = await client.post("/v1/sessions", json={})
    created.raise_for_status()
    session_id = created.json()["id"]
    cpu_s, errors, outputs = 0.0, 0, []
    for code in CELLS:
        response = await client.post(f"/v1/sessions/{session_id}/execute", json={"code": code})
        result = response.json() if response.status_code == 200 else {}
        cpu_s += float(result.get("cpu_s", 0.0))
        errors += result.get("status") != "ok"
        outputs.append(result.get("stdout", ""))
    await client.delete(f"/v1/sessions/{session_id}")
    return cpu_s, errors, outputs[1] == outputs[-1] and outputs[1] != ""


def _replay_code(index: int) -> str:
    """Earlier cells run with their output suppressed, then cell ``index`` with the echo."""
    earlier = "\n".join(CELLS[:index])
    quiet = (
        "import contextlib, io\n"
        f"with contextlib.redirect_stdout(io.StringIO()):\n    exec({earlier!r})\n"
    )
    return quiet + CELLS[index] if index else CELLS[0]


async def _replay_trajectory(client: httpx.AsyncClient) -> tuple[float, int, bool]:
    cpu_s, errors, outputs = 0.0, 0, []
    for index in range(len(CELLS)):
        body = {"code": _replay_code(index), "echo_last_expr": True}
        response = await client.post("/v1/execute", json=body)
        result = response.json() if response.status_code == 200 else {}
        cpu_s += float(result.get("cpu_s", 0.0))
        errors += result.get("status") != "ok"
        outputs.append(result.get("stdout", ""))
    return cpu_s, errors, outputs[1] == outputs[-1] and outputs[1] != ""


async def _measure(
    label: str, url: str, token: str | None, trajectories: int, replay: bool
) -> Outcome:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    run = _replay_trajectory if replay else _session_trajectory
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=120) as client:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(label, total=trajectories)

            async def one() -> tuple[float, int, bool]:
                outcome = await run(client)
                progress.advance(task)
                return outcome

            started = time.perf_counter()
            outcomes = await asyncio.gather(*(one() for _ in range(trajectories)))
            wall_s = time.perf_counter() - started
    return Outcome(
        label, wall_s, sum(o[0] for o in outcomes), trajectories * len(CELLS),
        sum(o[1] for o in outcomes), sum(o[2] for o in outcomes),
    )  # fmt: skip


def _table(outcomes: list[Outcome], trajectories: int) -> Table:
    table = Table(title=f"{trajectories} trajectories x {len(CELLS)} cells, same service, same run")
    for column in ("approach", "wall s", "cell CPU s", "calls", "errors", "same random value",
                   "CPU vs sessions"):  # fmt: skip
        table.add_column(column, justify="right")
    base = outcomes[0].cpu_s or 1e-9
    for o in outcomes:
        table.add_row(o.label, f"{o.wall_s:.2f}", f"{o.cpu_s:.2f}", str(o.calls), str(o.errors),
                      f"{o.consistent}/{trajectories}", f"{o.cpu_s / base:.1f}x")  # fmt: skip
    return table


async def run(url: str, token: str | None, trajectories: int) -> None:
    """Runs both approaches and prints one table."""
    outcomes = [
        await _measure("sessions", url, token, trajectories, replay=False),
        await _measure("replay (fresh job per call)", url, token, trajectories, replay=True),
    ]
    console.print(_table(outcomes, trajectories))
