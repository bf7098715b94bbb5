"""Import boundaries: the core is framework-free; the trainer never loads the executor."""

import subprocess
import sys

import pytest

CORE_MODULES = [
    "trainer.core.agent_loop", "trainer.core.grpo", "trainer.core.metrics", "trainer.core.roc",
    "trainer.core.verify", "trainer.core.tools", "trainer.core.timing", "trainer.core.advantage",
]  # fmt: skip


def loaded_after_import(modules: list[str]) -> set[str]:
    code = "import sys; " + "; ".join(f"import {m}" for m in modules)
    code += "; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_core_imports_no_framework_and_no_executor() -> None:
    loaded = top_level(loaded_after_import(CORE_MODULES))
    assert not loaded & {"torch", "transformers", "verl", "fastapi", "executor", "math_verify"}


@pytest.mark.parametrize("module", ["trainer.local.train", "gateway.client"])
def test_trainer_and_client_never_load_executor_or_fastapi(module: str) -> None:
    loaded = top_level(loaded_after_import([module]))
    assert "executor" not in loaded
    assert "fastapi" not in loaded
