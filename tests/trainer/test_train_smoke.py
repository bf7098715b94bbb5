"""``codepool train`` end to end with a tiny config: metrics, checkpoints, resume."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

CODEPOOL = str(Path(sys.executable).parent / "codepool")
TINY = ["--preset", "toy", "--prompts-per-step", "2", "--group-size", "4",
        "--rollouts-per-prompt", "8", "--checkpoint-every", "1", "--no-progress",
        "--run-name", "smoke"]  # fmt: skip


def train(url: str, out: Path, steps: int) -> subprocess.CompletedProcess[str]:
    argv = [CODEPOOL, "train", *TINY, "--service-url", url, "--output-dir", str(out),
            "--steps", str(steps)]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=600)


@pytest.mark.timeout(900)
def test_train_writes_metrics_checkpoints_and_resumes(codepool_url: str, tmp_path: Path) -> None:
    first = train(codepool_url, tmp_path, steps=2)
    assert first.returncode == 0, first.stderr[-3000:]
    run_dir = tmp_path / "smoke"
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1]
    for key in ("rollout/reward_mean", "tool/error_ratio_in_correct", "roc/dropped_ratio",
                "time/service_wait_s", "throughput/tool_calls_per_s"):  # fmt: skip
        assert key in lines[0]
    assert lines[0]["rollout/count"] == 16
    assert lines[0]["rollout/service_failed_ratio"] == 0.0
    assert lines[0]["tool/calls_per_rollout"] > 0  # the warm start calls the tool

    second = train(codepool_url, tmp_path, steps=3)
    assert second.returncode == 0, second.stderr[-3000:]
    lines = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [0, 1, 2]  # resumed after step 2, not restarted
    checkpoints = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert checkpoints == ["step_000002", "step_000003"]  # keep_checkpoints = 2


def test_help_lists_every_flag() -> None:
    out = subprocess.run([CODEPOOL, "train", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    assert "--rollouts-per-prompt" in out.stdout and "Clip-Higher" in out.stdout
