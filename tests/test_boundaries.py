"""Package boundaries from DESIGN.md, checked on the source's imports (AST, no import-time I/O)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GATEWAY_MAY_IMPORT_FROM_EXECUTOR = {"executor.jobs", "executor.keys", "executor.settings"}


def imports_of(path: Path) -> set[str]:
    """Every module name a file imports (absolute imports; relative ones resolved)."""
    names: set[str] = set()
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))  # fmt: skip
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def top(name: str) -> str:
    return name.split(".")[0]


@pytest.mark.parametrize("path", sources("executor"), ids=str)
def test_executor_imports_nothing_of_gateway_or_trainer(path: Path) -> None:
    assert not {top(n) for n in imports_of(path)} & {"gateway", "trainer"}


def contract_only(name: str) -> bool:
    """True for ``executor`` itself and the contract modules (and names inside them)."""
    return name == "executor" or any(
        name == module or name.startswith(module + ".")
        for module in GATEWAY_MAY_IMPORT_FROM_EXECUTOR
    )


@pytest.mark.parametrize("path", sources("gateway"), ids=str)
def test_gateway_imports_only_the_contract_from_executor(path: Path) -> None:
    bad = [n for n in imports_of(path) if top(n) == "executor" and not contract_only(n)]
    assert not bad


@pytest.mark.parametrize("path", sources("trainer"), ids=str)
def test_trainer_never_imports_executor(path: Path) -> None:
    assert "executor" not in {top(n) for n in imports_of(path)}


def test_http_clients_do_not_import_fastapi() -> None:
    for name in ("client.py", "session_client.py"):
        client = ROOT / "gateway" / name
        assert not {top(n) for n in imports_of(client)} & {"fastapi", "starlette"}, name


def test_the_checker_sees_a_violation() -> None:
    assert contract_only("executor.keys.JOBS_STREAM")
    assert not contract_only("executor.pool")
    assert not contract_only("executor.keysmith")
