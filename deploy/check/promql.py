"""Which metrics and labels a PromQL expression uses, held against the metrics contract.

Not a full PromQL parser: it finds vector selectors (``name{matchers}``) and grouping clauses
(``by (...)``) well enough to catch a misspelt metric, label or status value. promtool checks the
syntax separately.
"""

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
NUMBER = re.compile(r"[0-9.][0-9A-Za-z_.+-]*")
MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*,?')
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile", "limitk", "limit_ratio"}  # fmt: skip
KEYWORDS = GROUPING | AGGREGATIONS | {"bool", "and", "or", "unless", "offset", "inf", "nan"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
GRAFANA_INTERVALS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}


@dataclass(frozen=True)
class Selector:
    """One vector selector: a metric name and its label matchers."""

    name: str
    matchers: tuple[tuple[str, str, str], ...]  # (label, op, value)


@dataclass
class Usage:
    """Everything an expression refers to."""

    selectors: list[Selector] = field(default_factory=list)
    grouping_labels: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class Contract:
    """The metrics codepool exposes (deploy/monitoring/metrics.yaml)."""

    metrics: dict[str, dict[str, Any]]
    label_values: dict[str, list[str]]
    target_labels: frozenset[str]

    @classmethod
    def load(cls, path: Path) -> "Contract":
        """Reads the contract file."""
        data = yaml.safe_load(path.read_text())
        return cls(data["metrics"], data.get("label_values", {}), frozenset(data["target_labels"]))

    def series_labels(self, name: str) -> set[str] | None:
        """Labels a stored series ``name`` may carry; None if no such series exists."""
        if name in self.metrics and self.metrics[name]["type"] != "histogram":
            return set(self.metrics[name].get("labels", [])) | self.target_labels
        for suffix in HISTOGRAM_SUFFIXES:
            base = name.removesuffix(suffix)
            if base != name and self.metrics.get(base, {}).get("type") == "histogram":
                extra = {"le"} if suffix == "_bucket" else set()
                return set(self.metrics[base].get("labels", [])) | self.target_labels | extra
        return None


def _skip_string(expr: str, i: int) -> int:
    quote = expr[i]
    i += 1
    while i < len(expr) and expr[i] != quote:
        i += 2 if expr[i] == "\\" else 1
    return i + 1


def _matchers(body: str) -> tuple[tuple[str, str, str], ...]:
    found = []
    for match in MATCHER.finditer(body):
        label, op, quoted = match.groups()
        found.append((label, op, quoted[1:-1]))
    return tuple(found)


def usage(expr: str) -> Usage:
    """The selectors and grouping labels of ``expr``."""
    for variable, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, value)
    found = Usage()
    i = 0
    while i < len(expr):
        char = expr[i]
        if char in "\"'`":
            i = _skip_string(expr, i)
        elif char == "[":
            i = expr.index("]", i) + 1
        elif char == "{":  # a selector without a name: {__name__="..."}
            end = expr.index("}", i)
            matchers = _matchers(expr[i + 1 : end])
            name = next((v for label, op, v in matchers if label == "__name__" and op == "="), "")
            found.selectors.append(Selector(name, matchers))
            i = end + 1
        elif number := NUMBER.match(expr, i) if char.isdigit() or char == "." else None:
            i = number.end()
        elif ident := IDENT.match(expr, i):
            i = _identifier(expr, ident.group(), ident.end(), found)
        else:
            i += 1
    return found


def _identifier(expr: str, name: str, i: int, found: Usage) -> int:
    rest = expr[i:].lstrip()
    after = len(expr) - len(rest)
    if name in GROUPING and rest.startswith("("):
        end = expr.index(")", after)
        found.grouping_labels |= {x.strip() for x in expr[after + 1 : end].split(",") if x.strip()}
        return end + 1
    if name.lower() in KEYWORDS or rest.startswith("("):  # a keyword, function or aggregation
        return i
    if rest.startswith("{"):
        end = expr.index("}", after)
        found.selectors.append(Selector(name, _matchers(expr[after + 1 : end])))
        return end + 1
    found.selectors.append(Selector(name, ()))
    return i


def problems(expr: str, contract: Contract, *, require_label: str | None = None) -> list[str]:
    """What in ``expr`` the contract does not know; ``require_label`` must be on every selector."""
    found = usage(expr)
    out: list[str] = []
    known_labels: set[str] = set()
    if not found.selectors:
        out.append("uses no metric")
    for selector in found.selectors:
        labels = contract.series_labels(selector.name)
        if labels is None:
            kind = contract.metrics.get(selector.name, {}).get("type")
            hint = " (a histogram: use _bucket, _sum or _count)" if kind == "histogram" else ""
            out.append(f"unknown metric {selector.name!r}{hint}")
            continue
        known_labels |= labels
        out += _matcher_problems(selector, labels, contract)
        if require_label and require_label not in {m[0] for m in selector.matchers}:
            out.append(f"{selector.name} has no {require_label} matcher")
    for label in sorted(found.grouping_labels - known_labels):
        if known_labels:
            out.append(f"groups by {label!r}, which none of its metrics has")
    return out


def _matcher_problems(selector: Selector, labels: set[str], contract: Contract) -> list[str]:
    out = []
    for label, op, value in selector.matchers:
        if label == "__name__":
            continue
        if label not in labels:
            out.append(f"{selector.name} has no label {label!r}")
        allowed = contract.label_values.get(label)
        if allowed is None or "$" in value:
            continue
        values = value.split("|") if op in ("=~", "!~") else [value]
        if op in ("=~", "!~") and not all(IDENT.fullmatch(v) for v in values):
            continue  # a real regular expression: not checked
        for v in values:
            if v not in allowed:
                out.append(f"{selector.name}{{{label}}} has no value {v!r}")
    return out
