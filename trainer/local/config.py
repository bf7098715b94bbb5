"""Everything a local run needs, in one dataclass. Each field's docstring is its ``--help``.

Presets: ``toy`` (the CPU learning test) and ``rstar2`` (the report's recipe: 2G = 32 → G = 16,
512 prompts per step, lr 1e-6 with 20 warm-up steps, stages 8K/12K/12K tokens, 10/10/15 turns).
"""

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from trainer.core.answer import Strictness
from trainer.core.roc import RocMode


@dataclass(frozen=True)
class Stage:
    """A span of steps with its own length and turn limits (and optionally data)."""

    name: str
    steps: int
    max_response_tokens: int
    max_turns: int
    dataset: str = ""
    reset_optimizer: bool = False


@dataclass(frozen=True)
class TrainConfig:
    """A GRPO-RoC run on one machine."""

    model: str = ""
    """Hugging Face model directory (weights and tokenizer) to start from."""
    dataset: str = ""
    """JSONL file with one {"prompt": ..., "answer": ...} object per line."""
    service_url: str = "http://127.0.0.1:8000"
    """Base URL of a running codepool (``codepool serve`` prints it)."""
    service_token: str = ""
    """Bearer token of the service, when it requires one (CODEPOOL_AUTH_TOKEN)."""
    output_dir: str = "runs"
    """Directory that holds one folder per run (metrics, checkpoints)."""
    run_name: str = ""
    """Folder name of the run; empty: ``{exp_name}__{roc}__s{seed}__{unix time}``."""
    exp_name: str = "grpo_roc"
    """Experiment name, the first part of a generated run name."""
    seed: int = 1
    """Seed of prompt order, sampling and RoC."""
    device: str = "auto"
    """torch device; auto: cuda when available, else cpu."""
    torch_threads: int = 0
    """CPU threads of torch; 0: torch's default (1 suits tiny models: more threads only spin)."""
    roc: RocMode = "paper"
    """Selection: paper (the report), public (rStar2's released code), none (plain GRPO)."""
    group_size: int = 8
    """G: rollouts per prompt trained on."""
    rollouts_per_prompt: int = 16
    """Rollouts sampled per prompt (2G for RoC; G for plain GRPO)."""
    prompts_per_step: int = 16
    """Prompts per training step."""
    steps: int = 30
    """Training steps when no stages are given."""
    max_turns: int = 3
    """Assistant turns per rollout when no stages are given."""
    max_response_tokens: int = 128
    """Response token budget (model and tool tokens) when no stages are given."""
    max_tokens_per_turn: int = 40
    """New tokens per assistant turn at most."""
    max_calls_per_turn: int = 4
    """Tool calls run per turn; later ones get an error response."""
    max_tool_output_chars: int = 2048
    """Tool output shown to the model, head and tail kept."""
    tool_timeout_s: float = 5.0
    """Time limit of one tool call in the sandbox."""
    tool_deadline_s: float = 300.0
    """Seconds the service has to answer a batch of calls; unstarted ones are retried."""
    tool_memory_mb: int = 0
    """Memory limit of one tool call; 0: the server's default."""
    tool: str = "python"
    """python: a fresh sandbox per call; jupyter: a live session per rollout, forked per prompt."""
    system_prompt: str = ""
    """System turn put before every question; empty: none."""
    temperature: float = 1.0
    """Sampling temperature of rollouts."""
    top_p: float = 1.0
    """Nucleus sampling threshold of rollouts."""
    learning_rate: float = 1e-6
    """AdamW learning rate after warm-up (constant)."""
    warmup_steps: int = 20
    """Steps of linear learning-rate warm-up."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    max_grad_norm: float = 1.0
    """Gradient clipping threshold (global L2 norm)."""
    clip_eps_low: float = 0.2
    """Lower clip of the ratio: 1 - eps_low."""
    clip_eps_high: float = 0.28
    """Upper clip of the ratio: 1 + eps_high (Clip-Higher)."""
    updates_per_step: int = 1
    """Optimizer steps per rollout batch (mini-batches); 1 keeps it on-policy."""
    micro_batch_size: int = 64
    """Sequences per forward/backward pass (gradient accumulation)."""
    answer_strictness: Strictness = "strict"
    """strict: the last box inside <answer>; lenient: the last box anywhere."""
    verify_timeout_s: float = 5.0
    """Per-answer time limit of math-verify (timeouts score 0)."""
    verify_workers: int = 2
    """Processes of the math-verify pool."""
    max_batch_wait_s: float = 0.5
    """Generation waits this long at most for every rollout to join a batch."""
    client_max_batch_items: int = 256
    """Tool calls per HTTP batch request at most."""
    client_max_in_flight: int = 8
    """HTTP requests in flight at most."""
    checkpoint_every: int = 10
    """Save a checkpoint every this many steps (and at the end); 0: only at the end."""
    keep_checkpoints: int = 2
    """Checkpoints kept; older ones are deleted."""
    resume: bool = True
    """Continue from the run folder's latest checkpoint when there is one."""
    progress: bool = True
    """Show a rich progress display."""
    stages: tuple[Stage, ...] = field(default_factory=tuple)
    """Stages: a preset name (rstar2) or a JSON file of stage objects; empty: one stage."""

    def resolved_stages(self) -> tuple[Stage, ...]:
        """The stages to run: the configured ones, or one built from the flat fields."""
        if self.stages:
            return self.stages
        return (Stage("main", self.steps, self.max_response_tokens, self.max_turns),)

    def validate(self) -> "TrainConfig":
        """Raises ValueError on settings that cannot work together."""
        if not self.model or not self.dataset:
            raise ValueError("--model and --dataset are required")
        if self.rollouts_per_prompt < self.group_size:
            raise ValueError("rollouts_per_prompt must be at least group_size")
        if self.tool not in ("python", "jupyter"):
            raise ValueError(f"tool must be python or jupyter, not {self.tool!r}")
        if self.roc == "none" and self.rollouts_per_prompt != self.group_size:
            raise ValueError("plain GRPO (roc none) trains on every rollout: set both to G")
        return self


TOY_DIR = Path(__file__).parents[1] / "toy"
RSTAR2_STAGES = (
    Stage("stage1", steps=300, max_response_tokens=8192, max_turns=10),
    Stage("stage2", steps=85, max_response_tokens=12288, max_turns=10),
    Stage("stage3", steps=125, max_response_tokens=12288, max_turns=15, reset_optimizer=True),
)
STAGE_PRESETS = {"rstar2": RSTAR2_STAGES}

PRESETS: dict[str, TrainConfig] = {
    "toy": TrainConfig(
        model=str(TOY_DIR / "warmstart"),
        dataset=str(TOY_DIR / "data" / "multiply.jsonl"),
        exp_name="toy",
        torch_threads=1,
        tool_deadline_s=60.0,
        learning_rate=5e-4,
        warmup_steps=0,
        max_turns=3,
        max_response_tokens=128,
        max_tokens_per_turn=40,
        checkpoint_every=0,
    ),
    "rstar2": TrainConfig(
        exp_name="rstar2",
        group_size=16,
        rollouts_per_prompt=32,
        prompts_per_step=512,
        learning_rate=1e-6,
        warmup_steps=20,
        max_tokens_per_turn=8192,
        max_tool_output_chars=4096,
        stages=RSTAR2_STAGES,
    ),
}


def parse_stages(value: str) -> tuple[Stage, ...]:
    """Stages from a preset name or a JSON file holding a list of stage objects."""
    if not value:
        return ()
    if value in STAGE_PRESETS:
        return STAGE_PRESETS[value]
    return tuple(Stage(**item) for item in json.loads(Path(value).read_text()))


def with_plain_grpo(config: TrainConfig) -> TrainConfig:
    """The same run without RoC: G rollouts per prompt, all trained on."""
    return replace(config, roc="none", rollouts_per_prompt=config.group_size)
