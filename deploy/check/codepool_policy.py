"""Rules particular to codepool: the sandbox worker's exact privileges and sizing, KEDA on the
job stream, network isolation of the pods that run untrusted code, a Redis that never evicts.
docs/deploy.md explains each."""

import re

from deploy.check.resources import (
    Doc,
    env_value,
    mebibytes,
    name_of,
    pods,
    redis_mebibytes,
    selects,
)

WORKER_CAPABILITIES = {"SYS_ADMIN", "SETUID", "SETGID", "SETPCAP", "CHOWN", "SYS_CHROOT"}
JOB_STREAM = "cp:v1:jobs"
CONSUMER_GROUP = "workers"
DEFAULT_MAX_TIMEOUT_S = 60
DRAIN_MARGIN_S = 30
SLOT_OVERHEAD_MIB = 768
WORKER_OVERHEAD_MIB = 512


def pod_security(docs: list[Doc]) -> list[str]:
    """Locked-down pods; the worker differs exactly as documented."""
    out = []
    for pod in pods(docs):
        spec = pod.spec
        for flag in ("hostNetwork", "hostPID", "hostIPC"):
            if spec.get(flag):
                out.append(f"{pod.owner}: {flag} is set")
        if spec.get("automountServiceAccountToken") is not False:
            out.append(f"{pod.owner}: automountServiceAccountToken is not false")
        pod_seccomp = spec.get("securityContext", {}).get("seccompProfile", {}).get("type")
        for c in pod.containers:
            where = f"{pod.owner} container {c['name']}"
            sc = c.get("securityContext", {})
            if sc.get("privileged"):
                out.append(f"{where}: privileged")
            if sc.get("readOnlyRootFilesystem") is not True:
                out.append(f"{where}: root filesystem is writable")
            if (sc.get("seccompProfile", {}).get("type") or pod_seccomp) != "RuntimeDefault":
                out.append(f"{where}: seccomp profile is not RuntimeDefault")
            if sc.get("capabilities", {}).get("drop") != ["ALL"]:
                out.append(f"{where}: capabilities are not dropped (drop: [ALL])")
            out += (
                _worker_container(where, sc)
                if pod.is_worker()
                else _plain_container(where, sc, spec)
            )
    return out


def _worker_container(where: str, sc: Doc) -> list[str]:
    out = []
    added = set(sc.get("capabilities", {}).get("add", []))
    if added != WORKER_CAPABILITIES:
        out.append(
            f"{where}: capabilities added {sorted(added)}, expected {sorted(WORKER_CAPABILITIES)}"
        )
    if sc.get("appArmorProfile", {}).get("type") != "Unconfined":
        out.append(
            f"{where}: AppArmor profile is not Unconfined (the default profile denies mount)"
        )
    if sc.get("allowPrivilegeEscalation") is False:
        out.append(f"{where}: allowPrivilegeEscalation false is refused with SYS_ADMIN")
    return out


def _plain_container(where: str, sc: Doc, spec: Doc) -> list[str]:
    out = []
    if sc.get("capabilities", {}).get("add"):
        out.append(f"{where}: adds capabilities")
    if sc.get("allowPrivilegeEscalation") is not False:
        out.append(f"{where}: allowPrivilegeEscalation is not false")
    if not (sc.get("runAsNonRoot") or spec.get("securityContext", {}).get("runAsNonRoot")):
        out.append(f"{where}: runAsNonRoot is not set")
    if "appArmorProfile" in sc or "appArmorProfile" in spec.get("securityContext", {}):
        out.append(f"{where}: changes the AppArmor profile")
    return out


def worker_sizing(docs: list[Doc]) -> list[str]:
    """The worker's grace period covers a job; its memory covers its slots."""
    out = []
    for pod in (p for p in pods(docs) if p.is_worker()):
        c = pod.spec["containers"][0]
        max_timeout_s = float(
            env_value(c, "CODEPOOL_SANDBOX_MAX_TIMEOUT_S") or DEFAULT_MAX_TIMEOUT_S
        )
        grace_s = pod.spec.get("terminationGracePeriodSeconds", 30)
        if grace_s < max_timeout_s + DRAIN_MARGIN_S:
            out.append(f"{pod.owner}: terminationGracePeriodSeconds {grace_s} < longest job "
                       f"{max_timeout_s:g} s + {DRAIN_MARGIN_S} s to drain")  # fmt: skip
        slots = int(env_value(c, "CODEPOOL_SANDBOX_SLOTS") or 0)
        job_mib = int(env_value(c, "CODEPOOL_SANDBOX_MAX_MEMORY_MB") or 4096)
        memory = c.get("resources", {}).get("limits", {}).get("memory")
        if not slots or memory is None:
            out.append(f"{pod.owner}: set CODEPOOL_SANDBOX_SLOTS (> 0) and a memory limit: "
                       "auto-sizing reads the node's memory, not the pod's limit")  # fmt: skip
            continue
        floor = WORKER_OVERHEAD_MIB + max(slots * SLOT_OVERHEAD_MIB, job_mib + SLOT_OVERHEAD_MIB)
        if mebibytes(memory) < floor:
            out.append(f"{pod.owner}: memory limit {memory} < {floor} MiB: {slots} warm slots "
                       f"and one job at its {job_mib} MiB maximum must fit")  # fmt: skip
        if c.get("resources", {}).get("requests", {}).get("memory") != memory:
            out.append(f"{pod.owner}: memory request differs from its limit (evictable)")
    return out


def autoscaling(docs: list[Doc]) -> list[str]:
    """Autoscaled Deployments exist and leave replicas to their scaler; KEDA reads the stream."""
    out = []
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    for scaler in (d for d in docs if d["kind"] in {"HorizontalPodAutoscaler", "ScaledObject"}):
        target = deployments.get(scaler["spec"]["scaleTargetRef"]["name"])
        if target is None:
            out.append(f"{name_of(scaler)}: scales a Deployment that does not exist")
        elif "replicas" in target["spec"]:
            out.append(f"{name_of(target)}: sets replicas although {name_of(scaler)} owns them")
        if scaler["kind"] == "ScaledObject" and target is not None:
            out += _keda_triggers(scaler, target, docs)
    return out


def _keda_triggers(scaler: Doc, target: Doc, docs: list[Doc]) -> list[str]:
    where = name_of(scaler)
    out = []
    if scaler["spec"].get("minReplicaCount", 0) < 1:
        out.append(f"{where}: minReplicaCount < 1: an unready gateway admits no work to scale on")
    container = target["spec"]["template"]["spec"]["containers"][0]
    slots = int(env_value(container, "CODEPOOL_SANDBOX_SLOTS") or 0)
    modes = set()
    for trigger in scaler["spec"]["triggers"]:
        meta = trigger.get("metadata", {})
        if trigger["type"] != "redis-streams":
            continue
        if (meta.get("stream"), meta.get("consumerGroup")) != (JOB_STREAM, CONSUMER_GROUP):
            out.append(f"{where}: trigger reads {meta.get('stream')}/{meta.get('consumerGroup')}, "
                       f"not {JOB_STREAM}/{CONSUMER_GROUP}")  # fmt: skip
        out += _redis_address(
            where, meta.get("address", ""), scaler["metadata"].get("namespace", ""), docs
        )
        for mode in ("lagCount", "pendingEntriesCount"):
            if mode in meta:
                modes.add(mode)
                if not str(meta[mode]).isdigit() or int(meta[mode]) < 1:
                    out.append(f"{where}: {mode} {meta[mode]!r} is not a positive integer string")
        pending = meta.get("pendingEntriesCount")
        if pending is not None and str(pending).isdigit() and slots and int(pending) >= slots:
            out.append(f"{where}: pendingEntriesCount {pending} >= {slots} slots per pod: "
                       "the in-flight trigger can never ask for another pod")  # fmt: skip
    out += [
        f"{where}: no redis-streams {m} trigger"
        for m in ("lagCount", "pendingEntriesCount")
        if m not in modes
    ]
    return out


def _redis_address(where: str, address: str, namespace: str, docs: list[Doc]) -> list[str]:
    host, _, port = address.rpartition(":")
    service, _, rest = host.partition(".")
    ns = rest.partition(".")[0]
    redis = next(
        (d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == service), None
    )
    if ns != namespace or redis is None:
        return [f"{where}: address {address!r} is not a Service of namespace {namespace!r} "
                "as KEDA's operator (in its own namespace) must name it"]  # fmt: skip
    if int(port or 0) not in {p["port"] for p in redis["spec"]["ports"]}:
        return [f"{where}: address {address!r} names a port the Service does not have"]
    return []


def network_policies(docs: list[Doc]) -> list[str]:
    """Namespaces with long-running pods deny by default; workers reach only pods and DNS."""
    out = []
    policies = [d for d in docs if d["kind"] == "NetworkPolicy"]
    namespaces = {p.namespace for p in pods(docs) if not p.owner.startswith("Job/")}
    for ns in sorted(namespaces):
        if not any(
            p["metadata"].get("namespace") == ns and not p["spec"]["podSelector"] for p in policies
        ):
            out.append(f"namespace {ns}: no default-deny NetworkPolicy")
    for pod in pods(docs):
        if not pod.is_worker():
            continue
        own = [
            p
            for p in policies
            if selects(p["spec"]["podSelector"].get("matchLabels", {}), pod.labels)
        ]
        if not any("Egress" in p["spec"].get("policyTypes", []) for p in own):
            out.append(f"{pod.owner}: no NetworkPolicy limits its egress")
        for policy in own:
            for rule in policy["spec"].get("egress", []):
                if not rule.get("to") or any("ipBlock" in peer for peer in rule["to"]):
                    out.append(f"{name_of(policy)}: worker egress open beyond selected pods")
    return out


def redis(docs: list[Doc]) -> list[str]:
    """Redis never evicts (it holds the queue) and keeps maxmemory under its memory limit."""
    out = []
    config = "\n".join(
        str(v) for d in docs if d["kind"] == "ConfigMap" for v in d.get("data", {}).values()
    )
    for pod in pods(docs):
        if pod.labels.get("app.kubernetes.io/component") != "redis":
            continue
        c = pod.spec["containers"][0]
        argv = [*c.get("command", []), *c.get("args", [])]
        if "noeviction" not in argv and not re.search(
            r"^maxmemory-policy\s+noeviction\b", config, re.M
        ):
            out.append(f"{pod.owner}: maxmemory-policy is not noeviction")
        if "--maxmemory" not in argv:
            out.append(f"{pod.owner}: no --maxmemory argument")
            continue
        maxmemory = argv[argv.index("--maxmemory") + 1]
        limit = c.get("resources", {}).get("limits", {}).get("memory")
        if limit is None or redis_mebibytes(maxmemory) > 0.8 * mebibytes(limit):
            out.append(f"{pod.owner}: maxmemory {maxmemory} is not under 80% of its limit {limit}")
    return out
