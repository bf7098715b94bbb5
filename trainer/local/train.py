"""``codepool train``: GRPO-RoC on one machine. Reads top to bottom:

set up (model, optimizer, resume) → for each step: sample 2G rollouts per prompt against the
service → score → RoC → advantages → clipped update → metrics and checkpoints.
"""

import asyncio
import random
import time
from collections.abc import Sequence
from pathlib import Path

import torch

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
from trainer.local.checkpoint import save_checkpoint
from trainer.local.config import Stage, TrainConfig
from trainer.local.data import Problem, problems_for_step
from trainer.local.generate import HFGenerator, SamplingSettings
from trainer.local.logbook import MetricsLog, ProgressView
from trainer.local.setup import HFTokenizer, Run, make_optimizer, make_warmup, set_up
from trainer.local.update import UpdateSettings, policy_update


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
    if selection.samples:  # the warm-up counts updates; a step with none leaves the rate
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
        auth_token=config.service_token or None,
        call_deadline_s=config.tool_deadline_s,
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
                        run.optimizer = make_optimizer(run.model, config)
                        run.schedule = make_warmup(run.optimizer, config.warmup_steps)
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
