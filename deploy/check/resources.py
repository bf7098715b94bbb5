"""Reading rendered manifests: pod templates, selectors, quantities, environment values."""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

Doc = dict[str, Any]

WORKLOADS = {"Deployment", "StatefulSet", "DaemonSet", "Job"}
MEMORY_UNITS = {"Ki": 2**-10, "Mi": 1, "Gi": 2**10, "Ti": 2**20, "K": 1e3 / 2**20,
                "M": 1e6 / 2**20, "G": 1e9 / 2**20, "": 1 / 2**20}  # fmt: skip


@dataclass(frozen=True)
class Pod:
    """The pod template of a workload."""

    owner: str  # Kind/name
    namespace: str
    labels: dict[str, str]
    spec: Doc

    @property
    def containers(self) -> list[Doc]:
        """Init and regular containers."""
        return [*self.spec.get("initContainers", []), *self.spec["containers"]]

    def is_worker(self) -> bool:
        """The sandbox worker: the one pod allowed its documented privileges."""
        return self.labels.get("app.kubernetes.io/component") == "worker"


def name_of(doc: Doc) -> str:
    """``Kind/name``."""
    return f"{doc['kind']}/{doc['metadata']['name']}"


def pods(docs: list[Doc]) -> Iterator[Pod]:
    """The pod template of every workload."""
    for doc in docs:
        if doc["kind"] in WORKLOADS:
            template = doc["spec"]["template"]
            labels = template.get("metadata", {}).get("labels", {})
            yield Pod(name_of(doc), doc["metadata"].get("namespace", ""), labels, template["spec"])


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Whether a non-empty matchLabels selector matches ``labels``."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def mebibytes(quantity: str | int) -> float:
    """A Kubernetes memory quantity in MiB."""
    match = re.fullmatch(r"([0-9.]+)([KMGT]i?|)", str(quantity))
    if not match:
        raise ValueError(f"unreadable memory quantity {quantity!r}")
    return float(match.group(1)) * MEMORY_UNITS[match.group(2)]


def redis_mebibytes(value: str) -> float:
    """A Redis memory setting (``1536mb``, ``6gb``, ``2g``) in MiB."""
    units = {"": 1, "k": 1e3, "kb": 2**10, "m": 1e6, "mb": 2**20, "g": 1e9, "gb": 2**30}
    match = re.fullmatch(r"([0-9]+)([kmg]b?|)", value.lower())
    if not match:
        raise ValueError(f"unreadable Redis memory setting {value!r}")
    return int(match.group(1)) * units[match.group(2)] / 2**20


def env_value(container: Doc, name: str) -> str | None:
    """A literal environment value of the container."""
    for item in container.get("env", []):
        if item["name"] == name:
            return None if item.get("value") is None else str(item["value"])
    return None
