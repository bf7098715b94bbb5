"""House rules for rendered manifests: what a schema cannot see.

Each rule takes every resource of one rendered target and returns its problems as text:
labels, named ports that exist, selectors that select, probes, pinned images, memory limits;
codepool_policy.py adds the rules particular to codepool.
"""

from collections.abc import Callable

from deploy.check import codepool_policy
from deploy.check.resources import WORKLOADS, Doc, name_of, pods, selects


def labels(docs: list[Doc]) -> list[str]:
    """Every resource carries app.kubernetes.io labels saying what it is part of."""
    out = []
    for doc in docs:
        have = doc["metadata"].get("labels", {})
        needed = ["app.kubernetes.io/part-of"]
        if doc["kind"] not in {"Namespace", "NetworkPolicy"}:
            needed += ["app.kubernetes.io/name", "app.kubernetes.io/component"]
        out += [f"{name_of(doc)}: no {label} label" for label in needed if label not in have]
    return out


def workload_selectors(docs: list[Doc]) -> list[str]:
    """A workload's selector matches its own pod template."""
    out = []
    for doc in docs:
        if doc["kind"] in WORKLOADS - {"Job"}:
            selector = doc["spec"]["selector"].get("matchLabels", {})
            template = doc["spec"]["template"].get("metadata", {}).get("labels", {})
            if not selects(selector, template):
                out.append(f"{name_of(doc)}: selector does not match its pod template")
    return out


def ports_and_probes(docs: list[Doc]) -> list[str]:
    """Container ports are named; probes use those names; long-running containers are probed."""
    out = []
    for pod in pods(docs):
        for c in pod.containers:
            where = f"{pod.owner} container {c['name']}"
            names = {p.get("name") for p in c.get("ports", [])}
            if None in names:
                out.append(f"{where}: a container port has no name")
            for probe_kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                probe = c.get(probe_kind, {})
                for action in ("httpGet", "tcpSocket"):
                    port = probe.get(action, {}).get("port")
                    if port is not None and port not in names:
                        out.append(f"{where}: {probe_kind} uses port {port!r}, not a named port")
            if not pod.owner.startswith("Job/"):
                out += [
                    f"{where}: no {kind}"
                    for kind in ("livenessProbe", "readinessProbe")
                    if kind not in c
                ]
    return out


def services(docs: list[Doc]) -> list[str]:
    """A Service selects pods and targets named ports that those pods have."""
    out = []
    for svc in (d for d in docs if d["kind"] == "Service"):
        selector = svc["spec"].get("selector", {})
        matched = [p for p in pods(docs) if selects(selector, p.labels)]
        if not matched:
            out.append(f"{name_of(svc)}: selects no pod")
            continue
        port_names = {
            p.get("name") for pod in matched for c in pod.containers for p in c.get("ports", [])
        }
        for port in svc["spec"]["ports"]:
            if "name" not in port:
                out.append(f"{name_of(svc)}: port {port['port']} has no name")
            if port.get("targetPort") not in port_names:
                target = port.get("targetPort")
                out.append(f"{name_of(svc)}: targetPort {target!r} is not a named port of its pods")
    return out


def images(docs: list[Doc]) -> list[str]:
    """Images are pinned: a tag other than latest, or a digest."""
    out = []
    for pod in pods(docs):
        for c in pod.containers:
            image = c["image"]
            tag = image.rsplit("/", 1)[-1].partition(":")[2]
            if "@sha256:" not in image and tag in ("", "latest"):
                out.append(f"{pod.owner} container {c['name']}: image {image!r} is not pinned")
    return out


def resources(docs: list[Doc]) -> list[str]:
    """Memory is requested and limited; extended resources (GPUs) have requests equal to limits."""
    out = []
    for pod in pods(docs):
        for c in pod.containers:
            where = f"{pod.owner} container {c['name']}"
            requests, limits = (
                c.get("resources", {}).get("requests", {}),
                c.get("resources", {}).get("limits", {}),
            )
            if "memory" not in requests or "memory" not in limits:
                out.append(f"{where}: memory request or limit missing")
            for name in (set(requests) | set(limits)) - {"cpu", "memory", "ephemeral-storage"}:
                if requests.get(name, limits.get(name)) != limits.get(name):
                    out.append(f"{where}: {name} request differs from its limit")
    return out


def monitors(docs: list[Doc]) -> list[str]:
    """ServiceMonitors and PodMonitors select something and scrape ports that exist by name."""
    out = []
    for mon in (d for d in docs if d["kind"] in {"ServiceMonitor", "PodMonitor"}):
        selector = mon["spec"]["selector"].get("matchLabels", {})
        if mon["kind"] == "ServiceMonitor":
            targets = [
                d
                for d in docs
                if d["kind"] == "Service" and selects(selector, d["metadata"].get("labels", {}))
            ]
            ports = {p.get("name") for t in targets for p in t["spec"]["ports"]}
            endpoints = mon["spec"]["endpoints"]
        else:
            matched = [p for p in pods(docs) if selects(selector, p.labels)]
            targets = matched  # type: ignore[assignment]
            ports = {
                p.get("name") for pod in matched for c in pod.containers for p in c.get("ports", [])
            }
            endpoints = mon["spec"]["podMetricsEndpoints"]
        if not targets:
            out.append(f"{name_of(mon)}: selects nothing")
        out += [f"{name_of(mon)}: port {e.get('port')!r} is not a named port of its targets"
                for e in endpoints if e.get("port") not in ports]  # fmt: skip
    return out


def disruption_budgets(docs: list[Doc]) -> list[str]:
    """Each PodDisruptionBudget covers a workload."""
    return [
        f"{name_of(pdb)}: selects no pod"
        for pdb in (d for d in docs if d["kind"] == "PodDisruptionBudget")
        if not any(
            selects(pdb["spec"]["selector"].get("matchLabels", {}), p.labels) for p in pods(docs)
        )
    ]


RULES: list[Callable[[list[Doc]], list[str]]] = [
    labels,
    workload_selectors,
    ports_and_probes,
    services,
    images,
    resources,
    monitors,
    disruption_budgets,
    codepool_policy.pod_security,
    codepool_policy.worker_sizing,
    codepool_policy.autoscaling,
    codepool_policy.network_policies,
    codepool_policy.redis,
]


def check(docs: list[Doc]) -> list[str]:
    """Every rule's problems for one rendered target."""
    return [problem for rule in RULES for problem in rule(docs)]
