"""The training config of a run: one of ``config/*.yaml`` on verl's defaults, plus overrides."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.verl.agent_loop import AGENT_NAME
from trainer.verl.settings import settings_from_config

CONFIG_DIR = Path(__file__).resolve().with_name("config")
AGENT_LOOP_CONFIG = CONFIG_DIR / "agent_loop.yaml"
RECIPES = ("single_node", "rstar2_stage1", "rstar2_stage2", "rstar2_stage3")


def locate(config: str) -> tuple[Path, str]:
    """(directory, name) of a recipe name or of a YAML file (which may build on ours)."""
    if config in RECIPES:
        return CONFIG_DIR, config
    path = Path(config).expanduser().resolve()
    if path.suffix not in (".yaml", ".yml") or not path.is_file():
        raise ValueError(f"--config is a recipe ({', '.join(RECIPES)}) or a YAML file: {config}")
    return path.parent, path.stem


def compose_config(config: str, overrides: Sequence[str] = ()) -> Any:
    """The resolved-on-demand hydra config of a run, checked for what RoC relies on."""
    from hydra import compose, initialize_config_dir

    directory, name = locate(config)
    search = [f"file://{CONFIG_DIR}", "pkg://verl.trainer.config"]
    defaults = [
        f"hydra.searchpath=[{','.join(search)}]",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={AGENT_LOOP_CONFIG}",
    ]
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        composed = compose(config_name=name, overrides=[*defaults, *overrides])
    check_config(composed)
    return composed


def config_problems(config: Any) -> list[str]:
    """What in ``config`` would break the RoC trainer (empty when nothing)."""
    settings = settings_from_config(config)
    rollout = config.actor_rollout_ref.rollout
    n_needed = settings.rollouts_per_prompt
    checks = [
        (not config.trainer.use_v1, "trainer.use_v1 must be false (RoC hooks the v0 trainer)"),
        (config.trainer.balance_batch, "trainer.balance_batch must be true (RoC runs there)"),
        (
            rollout.agent.default_agent_loop == AGENT_NAME,
            f"rollout.agent.default_agent_loop must be {AGENT_NAME}",
        ),
        (
            rollout.n == n_needed,
            f"rollout.n must be {n_needed} (roc_mode {settings.roc_mode}, G {settings.group_size})",
        ),
        (
            bool(rollout.multi_turn.max_assistant_turns),
            "rollout.multi_turn.max_assistant_turns must be set",
        ),
        (config.algorithm.adv_estimator == "grpo", "algorithm.adv_estimator must be grpo"),
        (
            not config.reward.reward_model.enable,
            "reward.reward_model.enable must be false (the agent loop scores)",
        ),
    ]
    return [problem for ok, problem in checks if not ok]


def check_config(config: Any) -> None:
    """Raises ``ValueError`` listing every problem :func:`config_problems` finds."""
    problems = config_problems(config)
    if problems:
        raise ValueError("invalid GRPO-RoC config:\n  " + "\n  ".join(problems))
