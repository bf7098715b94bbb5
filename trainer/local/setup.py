"""Setting a run up: model and tokenizer loading, device, optimizer, warm-up, resume."""

import logging
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

from trainer.local.checkpoint import latest_checkpoint, load_state
from trainer.local.config import Stage, TrainConfig
from trainer.local.data import Problem, load_problems

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


def make_optimizer(model: PreTrainedModel, config: TrainConfig) -> torch.optim.Optimizer:
    return torch.optim.AdamW(
        model.parameters(), lr=config.learning_rate, weight_decay=config.weight_decay
    )


def make_warmup(optimizer: torch.optim.Optimizer, warmup_steps: int) -> LambdaLR:
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
    optimizer = make_optimizer(model, config)
    schedule = make_warmup(optimizer, config.warmup_steps)
    run = Run(config, run_dir, device, model, tokenizer, optimizer, schedule)
    if checkpoint is not None:
        state = load_state(checkpoint)
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        run.start_step = int(state["step"])
        logger.info("resuming %s at step %d", run_dir, run.start_step)
    return run
