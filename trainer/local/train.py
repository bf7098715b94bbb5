"""``codepool train``: GRPO-RoC on one machine. Reads top to bottom:

set up (model, optimizer, resume) → for each step: sample 2G rollouts per prompt against the
service → score → RoC → advantages → clipped update → metrics and checkpoints.
"""

import asyncio
import logging
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.optim.lr_scheduler import LambdaLR
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from gateway.client import ClientSettings, CodepoolClient
from gateway.session_client import SessionClient, SessionClientSettings
from trainer.core.agent_loop import AgentLoop, LoopLimits
from trainer.core.chat import ChatFormat
from trainer.core.grpo import Rollout, make_rollout, select_rollouts
from trainer.core.jupyter import JupyterTool, open_group
from trainer.core.metrics import rollout_metrics, selection_metrics, tool_metrics
from trainer.core.timing import ActivityClock
from trainer.core.tools import PythonTool, ToolSettings
from trainer.core.trajectory import Trajectory
from trainer.core.verify import AnswerVerifier
from trainer.local.checkpoint import latest_checkpoint, load_state, save_checkpoint
from trainer.local.config import Stage, TrainConfig
from trainer.local.data import Problem, load_problems, problems_for_step
from trainer.local.generate import HFGenerator, SamplingSettings
from trainer.local.logbook import MetricsLog, ProgressView
from trainer.local.update import UpdateSettings, policy_update

logger = logging.getLogger(__name__)


class HFTokenizer:
    """A Hugging Face tokenizer seen through the core's ``Tokenizer`` protocol."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``, no special tokens added."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens kept."""
        text = self.tokenizer.decode(
            list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        assert isinstance(text, str)
        return text


@dataclass
class Run:
    """Everything a run holds between steps."""

    config: TrainConfig
    run_dir: Path
    device: torch.device
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    optimizer: torch.optim.Optimizer
    schedule: LambdaLR
    start_step: int = 0
    datasets: dict[str, list[Problem]] = field(default_factory=dict)

    def problems(self, stage: Stage) -> list[Problem]:
        """The stage's dataset (the run's when the stage names none), loaded once."""
        path = stage.dataset or self.config.dataset
        if path not in self.datasets:
            self.datasets[path] = load_problems(Path(path))
        return self.datasets[path]


def load_tokenizer(path: Path) -> PreTrainedTokenizerBase:
    """The tokenizer as its ``tokenizer.json`` defines it, when there is one.

    ``AutoTokenizer`` picks a class from the model type (a qwen2 config gets Qwen2's
    pre-tokenizer rebuilt from the vocabulary), which silently breaks a custom tokenizer.
    """
    if (path / "tokenizer.json").is_file():
        tokenizer = PreTrainedTokenizerFast.from_pretrained(str(path))
    else:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    assert isinstance(tokenizer, PreTrainedTokenizerBase)
    return tokenizer


def pick_device(name: str) -> torch.device:
    """``auto``: the first GPU when there is one, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def run_name(config: TrainConfig) -> str:
    """The configured name, or ``{exp_name}__{roc}__s{seed}__{unix time}``."""
    return config.run_name or f"{config.exp_name}__{config.roc}__s{config.seed}__{int(time.time())}"


def _optimizer(model: PreTrainedModel, config: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )


def _warmup(optimizer: torch.optim.Optimizer, warmup_steps: int) -> LambdaLR:
    """Constant learning rate after a linear warm-up over ``warmup_steps`` training steps."""
    return LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0
    )


def set_up(config: TrainConfig) -> Run:
    """Model, tokenizer, optimizer and schedule: from the latest checkpoint when resuming."""
    run_dir = Path(config.output_dir) / run_name(config)
    checkpoint = latest_checkpoint(run_dir) if config.resume else None
    source = str(checkpoint or config.model)
    device = pick_device(config.device)
    if config.torch_threads:
        torch.set_num_threads(config.torch_threads)
    torch.set_flush_denormal(True)  # denormals slow CPU math ~10x as weights settle
    model: PreTrainedModel = AutoModelForCausalLM.from_pretrained(source)
    model.to(device)  # type: ignore[arg-type]
    tokenizer = load_tokenizer(Path(source))
    optimizer = _optimizer(model, config)
    schedule = _warmup(optimizer, config.warmup_steps)
    run = Run(config, run_dir, device, model, tokenizer, optimizer, schedule)
    if checkpoint is not None:
        state = load_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        run.start_step = int(state["step"])
        logger.info("resuming %s at step %d", run_dir, run.start_step)
    return run


def stage_at(stages: Sequence[Stage], step: int) -> tuple[Stage, int]:
    """The stage a step belongs to and the step it starts at."""
    start = 0
    for stage in stages:
        if step < start + stage.steps:
            return stage, start
        start += stage.steps
    raise ValueError(f"step {step} is past the last stage")


async def collect_groups(
    loop: AgentLoop, generator: HFGenerator, prompts: list[list[int]], per_prompt: int,
    tools: list[list[JupyterTool]] | None = None,
) -> list[list[Trajectory]]:  # fmt: skip
    """``per_prompt`` rollouts of every prompt, all running at once (each with its own tool
    when ``tools`` gives one per rollout, else the loop's stateless one)."""

    async def one(prompt_ids: list[int], tool: JupyterTool | None) -> Trajectory:
        async with generator.participant():
            return await loop.run(prompt_ids, tool)

    flat = await asyncio.gather(*(
        one(prompt, tools[p][r] if tools else None)
        for p, prompt in enumerate(prompts) for r in range(per_prompt)
    ))  # fmt: skip
    return [list(flat[i : i + per_prompt]) for i in range(0, len(flat), per_prompt)]


async def _jupyter_tools(
    sessions: SessionClient | None, config: TrainConfig, problems: list[Problem]
) -> list[list[JupyterTool]] | None:
    """One session per prompt (its setup run once), forked into one per rollout."""
    if sessions is None:
        return None
    settings = _tool_settings(config)
    return list(await asyncio.gather(*(
        open_group(sessions, config.rollouts_per_prompt, settings, problem.setup)
        for problem in problems
    )))  # fmt: skip


async def train_step(
    run: Run, stage: Stage, step: int, client: CodepoolClient, verifier: AnswerVerifier,
    sessions: SessionClient | None = None,
) -> dict[str, float]:  # fmt: skip
    """One step: rollouts, reward, RoC, update. Returns the step's metrics."""
    config = run.config
    torch.manual_seed(config.seed * 1_000_003 + step)
    rng = random.Random(config.seed * 1_000_003 + step)
    problems = problems_for_step(run.problems(stage), step, config.prompts_per_step, config.seed)
    tokenizer = HFTokenizer(run.tokenizer)
    chat = ChatFormat()
    prompts = [tokenizer.encode(chat.prompt(p.prompt, config.system_prompt)) for p in problems]

    clock = ActivityClock()
    generator = _generator(run, clock)
    loop = AgentLoop(
        generator, _tool(client, config), tokenizer, _limits(config, stage), chat, clock
    )
    started_s = time.perf_counter()
    clock.start()
    run.model.eval()
    tools = await _jupyter_tools(sessions, config, problems)
    try:
        groups = await collect_groups(loop, generator, prompts, config.rollouts_per_prompt, tools)
    finally:
        clock.stop()
        await generator.aclose()
        for tool in (t for group in tools or [] for t in group):
            await tool.close()
    rollout_s = time.perf_counter() - started_s

    scored = await _score(verifier, groups, problems)
    reward_s = time.perf_counter() - started_s - rollout_s
    selection = select_rollouts(scored, config.group_size, config.roc, rng)
    update = policy_update(
        run.model, run.optimizer, selection.samples, _update_settings(config),
        run.tokenizer.pad_token_id, rng,
    ) if selection.samples else {}  # fmt: skip
    run.schedule.step()
    update_s = time.perf_counter() - started_s - rollout_s - reward_s

    flat = [r for group in scored for r in group]
    calls = sum(len(r.trajectory.tool_calls) for r in flat)
    return {
        **rollout_metrics(flat), **tool_metrics(flat), **selection_metrics(selection), **update,
        "loss/learning_rate": float(run.schedule.get_last_lr()[0]),
        "time/step_s": rollout_s + reward_s + update_s,
        "time/generate_s": clock.seconds["generate"],
        "time/service_wait_s": clock.seconds["service"],
        "time/rollout_other_s": clock.seconds["other"],
        "time/reward_s": reward_s,
        "time/update_s": update_s,
        "throughput/trajectories_per_s": len(flat) / rollout_s,
        "throughput/tool_calls_per_s": calls / rollout_s,
        "throughput/generate_batches": float(generator.batches),
    }  # fmt: skip


async def _score(
    verifier: AnswerVerifier, groups: list[list[Trajectory]], problems: list[Problem]
) -> list[list[Rollout]]:
    texts = [t.model_text for group in groups for t in group]
    answers = [p.answer for p, group in zip(problems, groups, strict=True) for _ in group]
    scores = iter(await verifier.score_many(texts, answers))
    return [[make_rollout(t, next(scores)) for t in group] for group in groups]


def _generator(run: Run, clock: ActivityClock) -> HFGenerator:
    config = run.config
    sampling = SamplingSettings(config.temperature, config.top_p, config.max_batch_wait_s)
    pad_id = run.tokenizer.pad_token_id
    eos_id = run.tokenizer.eos_token_id
    return HFGenerator(run.model, pad_id, eos_id, sampling, clock)


def _tool_settings(config: TrainConfig) -> ToolSettings:
    return ToolSettings(
        timeout_s=config.tool_timeout_s,
        memory_mb=config.tool_memory_mb or None,
        max_output_chars=config.max_tool_output_chars,
    )


def _tool(client: CodepoolClient, config: TrainConfig) -> PythonTool:
    return PythonTool(client, _tool_settings(config))


def _limits(config: TrainConfig, stage: Stage) -> LoopLimits:
    return LoopLimits(
        max_turns=stage.max_turns,
        max_response_tokens=stage.max_response_tokens,
        max_tokens_per_turn=config.max_tokens_per_turn,
        max_calls_per_turn=config.max_calls_per_turn,
    )


def _update_settings(config: TrainConfig) -> UpdateSettings:
    return UpdateSettings(
        eps_low=config.clip_eps_low,
        eps_high=config.clip_eps_high,
        max_grad_norm=config.max_grad_norm,
        updates_per_step=config.updates_per_step,
        micro_batch_size=config.micro_batch_size,
    )


def _save(run: Run, completed_steps: int) -> None:
    state = {"optimizer": run.optimizer.state_dict(), "schedule": run.schedule.state_dict()}
    save_checkpoint(
        run.run_dir, completed_steps, run.model, run.tokenizer, state, run.config.keep_checkpoints
    )


async def run_training(config: TrainConfig) -> Path:
    """Runs every stage to the end (resuming when asked); returns the run folder."""
    run = set_up(config.validate())
    stages = config.resolved_stages()
    total_steps = sum(stage.steps for stage in stages)
    log = MetricsLog(run.run_dir / "metrics.jsonl")
    verifier = AnswerVerifier(
        config.answer_strictness, config.verify_timeout_s, config.verify_workers
    )
    client_settings = ClientSettings(
        base_url=config.service_url,
        max_batch_items=config.client_max_batch_items,
        max_in_flight_requests=config.client_max_in_flight,
    )
    session_settings = SessionClientSettings(
        config.service_url, timeout_s=config.tool_timeout_s, memory_mb=config.tool_memory_mb or None
    )
    try:
        async with CodepoolClient(client_settings) as client, SessionClient(session_settings) as ss:
            sessions = ss if config.tool == "jupyter" else None
            with ProgressView(total_steps, run.start_step, config.progress) as view:
                for step in range(run.start_step, total_steps):
                    stage, stage_start = stage_at(stages, step)
                    if stage.reset_optimizer and step == stage_start:
                        run.optimizer = _optimizer(run.model, config)
                        run.schedule = _warmup(run.optimizer, config.warmup_steps)
                    metrics = await train_step(run, stage, step, client, verifier, sessions)
                    log.write(step, metrics)
                    view.advance(metrics)
                    done = step + 1
                    every = config.checkpoint_every
                    if done == total_steps or (every and done % every == 0):
                        _save(run, done)
    finally:
        verifier.close()
        log.close()
    return run.run_dir


def train(config: TrainConfig) -> Path:
    """Synchronous entry point of ``codepool train``."""
    return asyncio.run(run_training(config))
