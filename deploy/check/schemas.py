"""Schema validation of rendered manifests, offline.

Built-in kinds: kubernetes-validate's bundled OpenAPI schemas in strict mode (an unknown field is
an error). Custom resources: JSON schemas derived from cloudcoil's models of the KEDA and
prometheus-operator CRDs, made strict the same way. Any other kind is an error: nothing passes
unchecked.
"""

import hashlib
import json
from collections.abc import Iterable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

# The oldest Kubernetes the manifests support: 1.30 brings securityContext.appArmorProfile
# and the preStop sleep action.
KUBERNETES_VERSION = "1.30.0"

# apiVersion, kind -> (module, class) of the cloudcoil model.
CUSTOM_RESOURCES = {
    ("keda.sh/v1alpha1", "ScaledObject"): ("cloudcoil.models.keda.v1alpha1", "ScaledObject"),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): (
        "cloudcoil.models.keda.v1alpha1",
        "TriggerAuthentication",
    ),
    ("monitoring.coreos.com/v1", "ServiceMonitor"): (
        "cloudcoil.models.prometheus_operator.v1",
        "ServiceMonitor",
    ),
    ("monitoring.coreos.com/v1", "PodMonitor"): (
        "cloudcoil.models.prometheus_operator.v1",
        "PodMonitor",
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): (
        "cloudcoil.models.prometheus_operator.v1",
        "PrometheusRule",
    ),
}
MODEL_PACKAGES = ("cloudcoil", "cloudcoil.models.keda", "cloudcoil.models.prometheus_operator")


def _strict(node: Any) -> Any:
    """Forbids properties a schema does not name, as the API server's pruning would drop them."""
    if isinstance(node, dict):
        if node.get("type") == "object" and node.get("properties"):
            node.setdefault("additionalProperties", False)
        for value in node.values():
            _strict(value)
    elif isinstance(node, list):
        for value in node:
            _strict(value)
    return node


def _build_crd_schemas() -> dict[str, Any]:
    import importlib

    schemas = {}
    for (api_version, kind), (module, name) in CUSTOM_RESOURCES.items():
        model = getattr(importlib.import_module(module), name)
        schemas[f"{api_version}/{kind}"] = _strict(model.model_json_schema(by_alias=True))
    return schemas


def crd_schemas(cache_dir: Path) -> dict[str, Any]:
    """Strict JSON schemas of the custom resources, cached per model version (building: ~8 s)."""
    versions = ",".join(f"{p}={version(p.replace('.', '-'))}" for p in MODEL_PACKAGES)
    key = hashlib.sha256(versions.encode()).hexdigest()[:16]
    path = cache_dir / f"crd-schemas-{key}.json"
    if path.exists():
        cached: dict[str, Any] = json.loads(path.read_text())
        return cached
    schemas = _build_crd_schemas()
    cache_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schemas))
    return schemas


def _error_text(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
    return f"{where}: {error.message}"


def validate(docs: Iterable[dict[str, Any]], cache_dir: Path) -> list[str]:
    """Schema problems of each resource, named ``Kind/name: field: message``."""
    custom: dict[str, Any] | None = None
    out = []
    for doc in docs:
        name = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in CUSTOM_RESOURCES:
            if custom is None:
                custom = crd_schemas(cache_dir)
            problems = _validate_custom(doc, custom[f"{key[0]}/{key[1]}"])
        else:
            problems = _validate_builtin(doc)
        out += [f"{name}: {problem}" for problem in problems]
    return out


def _validate_custom(doc: dict[str, Any], schema: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(schema)
    return [_error_text(e) for e in sorted(validator.iter_errors(doc), key=str)]


def _validate_builtin(doc: dict[str, Any]) -> list[str]:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.SchemaNotFoundError as exc:
        return [f"no schema to check it against ({exc.message})"]
    except kubernetes_validate.ValidationError as exc:
        return [_error_text(exc)]
    return []
