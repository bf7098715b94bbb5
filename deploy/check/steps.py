"""The check's steps. Each takes the context and returns its problems (empty: passed)."""

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from deploy.check import policy, promql, resources, schemas

# What is rendered: the base and every overlay, each a deployable whole.
TARGETS = {
    "base": "k8s/base",
    "dev": "k8s/overlays/dev",
    "production": "k8s/overlays/production",
    "trainer": "k8s/overlays/trainer",
}
CONTRACT = "deploy/monitoring/metrics.yaml"
RULE_TESTS = "deploy/monitoring/prometheusrule.test.yaml"
DOCKERFILES = ("deploy/Dockerfile", "deploy/Dockerfile.trainer")
MISSING_TOOL = "{} not found: run scripts/setup.sh test"
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ten times faster

Doc = dict[str, Any]


class RenderFailed(Exception):
    """A later step needs the rendered manifests and rendering failed."""


@dataclass
class Context:
    """The tree under check, and what earlier steps produced."""

    root: Path
    cache_dir: Path
    targets: list[str] = field(default_factory=lambda: list(TARGETS))
    rendered: dict[str, list[Doc]] = field(default_factory=dict)
    render_problems: list[str] | None = None

    def docs(self) -> dict[str, list[Doc]]:
        """Every target's resources, rendering them on first use."""
        if self.render_problems is None:
            self.render_problems = render(self)
        if self.render_problems:
            raise RenderFailed
        return self.rendered


def tool(name: str) -> str | None:
    """An executable from this Python's environment, else from PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else shutil.which(name)


def run(argv: list[str], cwd: Path | None = None) -> tuple[int, str]:
    """Runs a tool offline-safe (no stdin); returns its exit status and combined output."""
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return done.returncode, (done.stdout + done.stderr).strip()


def tool_problems(name: str, argv: list[str], cwd: Path | None = None) -> list[str]:
    """Runs ``name`` with ``argv``; its output is the problem when it fails."""
    path = tool(name)
    if path is None:
        return [MISSING_TOOL.format(name)]
    rc, output = run([path, *argv], cwd)
    return [] if rc == 0 else [f"{name}: {line}" for line in output.splitlines() or [f"rc {rc}"]]


def unique(items: list[Any]) -> list[Any]:
    """``items`` without repeats, in order (overlays share most resources)."""
    seen: dict[str, Any] = {}
    for item in items:
        seen.setdefault(json.dumps(item, sort_keys=True), item)
    return list(seen.values())


# --- steps --------------------------------------------------------------------------------


def lint_yaml(ctx: Context) -> list[str]:
    """yamllint, strict, over k8s/ and deploy/."""
    config = ctx.root / "deploy/yamllint.yaml"
    return tool_problems("yamllint", ["-s", "-c", str(config), "k8s", "deploy"], ctx.root)


def render(ctx: Context) -> list[str]:
    """``kubectl kustomize`` of every target (in parallel: each takes most of a second)."""
    kubectl = tool("kubectl")
    if kubectl is None:
        return [MISSING_TOOL.format("kubectl")]
    paths = [ctx.root / TARGETS[t] for t in ctx.targets]
    with ThreadPoolExecutor(len(paths)) as pool:
        results = pool.map(lambda path: run([kubectl, "kustomize", str(path)]), paths)
        outputs = dict(zip(ctx.targets, results, strict=True))
    out = []
    for target, (rc, output) in outputs.items():
        if rc != 0:
            out.append(f"{target}: {output}")
            continue
        ctx.rendered[target] = [d for d in yaml.load_all(output, Loader=LOADER) if d]
    ctx.render_problems = out
    return out


def validate_schemas(ctx: Context) -> list[str]:
    """Every distinct resource against its schema."""
    docs = unique([d for docs in ctx.docs().values() for d in docs])
    return schemas.validate(docs, ctx.cache_dir)


def house_rules(ctx: Context) -> list[str]:
    """policy.py's rules, per target."""
    return [f"{t}: {p}" for t, docs in ctx.docs().items() for p in policy.check(docs)]


# What every service target must contain, so that no rule passes for want of anything to check.
SERVICE_RESOURCES = (
    "Deployment/gateway", "HorizontalPodAutoscaler/gateway", "Deployment/worker",
    "ScaledObject/worker", "StatefulSet/redis", "PrometheusRule/codepool",
    "ConfigMap/codepool-dashboard", "NetworkPolicy/default-deny",
)  # fmt: skip


def overlay_promises(ctx: Context) -> list[str]:
    """What each target exists for (issue 6): the service is all there, dev is small,
    production authenticates and spreads, the trainer asks for MI300X GPUs."""
    promises = {"dev": _dev_is_small, "production": _production_hardened, "trainer": _trainer_gpus}
    out = []
    for target, docs in ctx.docs().items():
        names = {resources.name_of(d) for d in docs}
        wanted = ("Job/trainer",) if target == "trainer" else SERVICE_RESOURCES
        missing = [f"{target}: no {name}" for name in wanted if name not in names]
        promise = promises.get(target)
        out += missing or [f"{target}: {p}" for p in (promise(docs) if promise else [])]
    return out


def _dev_is_small(docs: list[Doc]) -> list[str]:
    out = []
    for doc in docs:
        spec = doc.get("spec", {})
        top = spec.get("maxReplicas", spec.get("maxReplicaCount"))
        if top is not None and top != 1:
            out.append(f"{resources.name_of(doc)} may scale to {top}, not 1")
    return out


def _production_hardened(docs: list[Doc]) -> list[str]:
    by_owner = {p.owner: p for p in resources.pods(docs)}
    gateway = by_owner["Deployment/gateway"].spec["containers"][0]
    token: Doc = next((e for e in gateway.get("env", []) if e["name"] == "CODEPOOL_AUTH_TOKEN"), {})
    out = []
    if "secretKeyRef" not in token.get("valueFrom", {}):
        out.append("the gateway's CODEPOOL_AUTH_TOKEN does not come from a Secret")
    for owner in ("Deployment/gateway", "Deployment/worker"):
        if not by_owner[owner].spec.get("topologySpreadConstraints"):
            out.append(f"{owner} has no topologySpreadConstraints")
    return out


def _trainer_gpus(docs: list[Doc]) -> list[str]:
    for pod in resources.pods(docs):
        if any("amd.com/gpu" in c.get("resources", {}).get("limits", {}) for c in pod.containers):
            return []
    return ["no container asks for amd.com/gpu"]


def alert_rules(ctx: Context) -> list[str]:
    """promtool check + unit tests of each distinct PrometheusRule; names against the contract."""
    contract = promql.Contract.load(ctx.root / CONTRACT)
    tests = yaml.safe_load((ctx.root / RULE_TESTS).read_text())
    tested = {
        a["alertname"]
        for t in tests["tests"]
        for a in t.get("alert_rule_test", [])
        if a.get("exp_alerts")
    }
    specs = unique(
        [d["spec"] for docs in ctx.docs().values() for d in docs if d["kind"] == "PrometheusRule"]
    )
    if not specs:
        return ["no PrometheusRule rendered"]
    out = []
    for spec in specs:
        for rule in (r for g in spec["groups"] for r in g["rules"]):
            name = rule.get("alert") or rule.get("record")
            out += [f"{name}: {p}" for p in promql.problems(rule["expr"], contract)]
            if "alert" in rule:
                out += _alert_shape(rule, tested)
        out += _promtool_rules(spec, ctx.root / RULE_TESTS)
    return out


def _alert_shape(rule: Doc, tested: set[str]) -> list[str]:
    name = rule["alert"]
    out = []
    if rule.get("labels", {}).get("severity") not in {"critical", "warning", "info"}:
        out.append(f"{name}: no severity label")
    out += [
        f"{name}: no {a} annotation"
        for a in ("summary", "description")
        if a not in rule.get("annotations", {})
    ]
    if name not in tested:
        out.append(f"{name}: no unit test expects it to fire ({RULE_TESTS})")
    return out


def _promtool_rules(spec: Doc, test_file: Path) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "rules.yaml").write_text(yaml.safe_dump(spec))
        shutil.copy(test_file, Path(tmp) / test_file.name)
        return tool_problems(
            "promtool", ["check", "rules", "rules.yaml"], Path(tmp)
        ) or tool_problems("promtool", ["test", "rules", test_file.name], Path(tmp))


def dashboards(ctx: Context) -> list[str]:
    """Each distinct dashboard: its shape, every panel's metrics, and its PromQL's syntax."""
    contract = promql.Contract.load(ctx.root / CONTRACT)
    boards = unique([
        json.loads(text)
        for docs in ctx.docs().values() for d in docs
        if d["kind"] == "ConfigMap" and d["metadata"].get("labels", {}).get("grafana_dashboard")
        for key, text in d.get("data", {}).items() if key.endswith(".json")
    ])  # fmt: skip
    if not boards:
        return ["no dashboard ConfigMap (label grafana_dashboard) rendered"]
    out: list[str] = []
    for board in boards:
        out += _dashboard_problems(board, contract)
    return out


def _panels(board: Doc) -> list[Doc]:
    return [p for top in board["panels"] for p in (top, *top.get("panels", []))]


def _dashboard_problems(board: Doc, contract: promql.Contract) -> list[str]:
    title = board.get("title", "?")
    variables = {v["name"] for v in board.get("templating", {}).get("list", [])}
    out = [f"{title}: no {v} variable" for v in ("datasource", "namespace") if v not in variables]
    out += [f"{title}: no {k}" for k in ("uid", "title", "schemaVersion") if k not in board]
    panels = _panels(board)
    ids = [p.get("id") for p in panels]
    if len(ids) != len(set(ids)):
        out.append(f"{title}: panel ids repeat")
    records = []
    for panel in (p for p in panels if p["type"] != "row"):
        where = f"{title} / {panel.get('title')}"
        if not panel.get("targets") or "gridPos" not in panel:
            out.append(f"{where}: no targets or no gridPos")
        for target in panel.get("targets", []):
            if target.get("datasource", panel.get("datasource", {})).get("uid") != "${datasource}":
                out.append(f"{where}: not on the ${{datasource}} variable")
            out += [
                f"{where}: {p}"
                for p in promql.problems(target["expr"], contract, require_label="namespace")
            ]
            records.append(
                {
                    "record": f"panel_{panel['id']}_{target['refId']}",
                    "expr": _concrete(target["expr"]),
                }
            )
    return out + _promql_syntax(title, records)


def _concrete(expr: str) -> str:
    for variable, value in promql.GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, value)
    return expr


def _promql_syntax(title: str, records: list[Doc]) -> list[str]:
    """promtool parses each panel query as a recording rule."""
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "panels.yaml").write_text(
            yaml.safe_dump({"groups": [{"name": "panels", "rules": records}]})
        )
        return [
            f"{title}: {p}"
            for p in tool_problems("promtool", ["check", "rules", "panels.yaml"], Path(tmp))
        ]


def container_files(ctx: Context) -> list[str]:
    """hadolint on the Dockerfiles, shellcheck on the scripts, the compose file's schema."""
    hadolint = ["--config", "deploy/hadolint.yaml", *DOCKERFILES]
    scripts = sorted(str(p.relative_to(ctx.root)) for p in (ctx.root / "deploy").glob("*.sh"))
    compose = ["--builtin-schema", "vendor.compose-spec", "deploy/compose.yaml"]
    return (
        tool_problems("hadolint", hadolint, ctx.root)
        + tool_problems("shellcheck", ["-s", "sh", *scripts], ctx.root)
        + tool_problems("check-jsonschema", compose, ctx.root)
    )


def _guard(step: Callable[[Context], list[str]]) -> Callable[[Context], list[str]]:
    def guarded(ctx: Context) -> list[str]:
        try:
            return step(ctx)
        except RenderFailed:
            return ["not checked: rendering failed (see the render step)"]

    return guarded


STEPS: dict[str, Callable[[Context], list[str]]] = {
    "yaml": lint_yaml,
    "render": render,
    "schemas": _guard(validate_schemas),
    "policy": _guard(house_rules),
    "overlays": _guard(overlay_promises),
    "rules": _guard(alert_rules),
    "dashboard": _guard(dashboards),
    "images": container_files,
}
