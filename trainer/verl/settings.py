"""codepool's own settings of a verl run: the ``codepool:`` section of the training config.

verl hands every agent loop and the trainer the whole hydra config, so one section carries
what verl has no key for (the service, RoC, tool limits, answer checking). Turn and length
limits are verl's own keys (``rollout.multi_turn.max_assistant_turns``,
``rollout.response_length``) so that they are stated once.
"""

from dataclasses import dataclass, fields
from typing import Any, cast

from trainer.core.answer import Strictness
from trainer.core.roc import RocMode

ROC_MODES: tuple[RocMode, ...] = ("paper", "public", "none")
STRICTNESS: tuple[Strictness, ...] = ("strict", "lenient")


@dataclass(frozen=True)
class CodepoolSettings:
    """Service, RoC, tool and answer settings of a verl run."""

    service_url: str = "http://127.0.0.1:8000"
    """Base URL of codepool's gateway, reachable from every node that runs agent loops."""
    roc_mode: RocMode = "paper"
    """paper (the report), public (rStar2's released code), none (plain GRPO)."""
    group_size: int = 16
    """G: rollouts per prompt trained on; rollout.n must be 2G (G for mode none)."""
    seed: int = 1
    """Seed of RoC's sampling (mixed with the step number)."""
    max_tokens_per_turn: int = 0
    """New tokens per assistant turn at most; 0: the remaining response budget."""
    max_calls_per_turn: int = 4
    """Tool calls run per turn; later ones get an error response."""
    tool_timeout_s: float = 5.0
    """Time limit of one tool call in the sandbox."""
    tool_memory_mb: int = 0
    """Memory limit of one tool call; 0: the server's default."""
    max_tool_output_chars: int = 2048
    """Tool output shown to the model, head and tail kept."""
    answer_strictness: Strictness = "strict"
    """strict: last box of the last <answer> block; lenient: last box anywhere."""
    verify_timeout_s: float = 5.0
    """math-verify's time per answer (a timeout scores 0)."""
    verify_workers: int = 2
    """math-verify processes per agent-loop worker."""
    client_max_batch_items: int = 256
    """Tool calls per HTTP batch request."""
    client_max_in_flight_requests: int = 8
    """HTTP batch requests in flight per agent-loop worker."""
    client_request_timeout_s: float = 300.0
    """Time allowed to one HTTP batch request."""

    def __post_init__(self) -> None:
        if self.roc_mode not in ROC_MODES:
            raise ValueError(f"codepool.roc_mode must be one of {ROC_MODES}, not {self.roc_mode!r}")
        if self.answer_strictness not in STRICTNESS:
            raise ValueError(f"codepool.answer_strictness must be one of {STRICTNESS}")
        if self.group_size < 2:
            raise ValueError("codepool.group_size must be at least 2")

    @property
    def rollouts_per_prompt(self) -> int:
        """What rollout.n must be: 2G with RoC, G for plain GRPO."""
        return self.group_size if self.roc_mode == "none" else 2 * self.group_size


def settings_from_config(config: Any) -> CodepoolSettings:
    """The ``codepool`` section of a verl config (an OmegaConf node or a mapping)."""
    from omegaconf import DictConfig, OmegaConf

    section = config.get("codepool") if config is not None else None
    if section is None:
        return CodepoolSettings()
    raw = (
        OmegaConf.to_container(section, resolve=True)
        if isinstance(section, DictConfig)
        else section
    )
    values = cast(dict[str, Any], raw)
    known = {f.name for f in fields(CodepoolSettings)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown keys in the codepool section: {', '.join(unknown)}")
    return CodepoolSettings(**values)
