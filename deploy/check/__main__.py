"""Renders every overlay and validates it offline; exits 1 on any problem.

    python -m deploy.check [--root DIR] [--only STEP ...]

Steps: yaml (yamllint), render (kubectl kustomize), schemas (kubernetes-validate --strict for
built-in kinds, the KEDA and prometheus-operator CRD schemas for the rest), policy (house
rules), overlays (what each overlay promises), rules (promtool check + unit tests, metric names
against the contract), dashboard (panels against the contract, PromQL syntax via promtool),
images (hadolint, shellcheck, the compose schema). A missing tool is a failure, never a skip.
"""

import argparse
import sys
import time
from pathlib import Path

from deploy.check import steps

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    """Runs the chosen steps and prints one line per step; 0 only if nothing failed."""
    parser = argparse.ArgumentParser(prog="python -m deploy.check", description=__doc__)
    parser.add_argument("--root", type=Path, default=REPO, help="tree holding k8s/ and deploy/")
    parser.add_argument("--only", nargs="+", choices=list(steps.STEPS), help="run these steps")
    parser.add_argument(
        "--targets", nargs="+", choices=list(steps.TARGETS), help="render only these (default: all)"
    )
    args = parser.parse_args(argv)
    ctx = steps.Context(args.root.resolve(), REPO / "build" / "deploy-check")
    ctx.targets = args.targets or ctx.targets
    failed = 0
    for name in args.only or list(steps.STEPS):
        started = time.monotonic()
        problems = steps.STEPS[name](ctx)
        took_s = time.monotonic() - started
        status = "ok" if not problems else f"FAILED ({len(problems)})"
        print(f"[deploy-check] {name}: {status} in {took_s:.1f} s", flush=True)
        for problem in problems:
            print(f"    {problem}")
        failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
