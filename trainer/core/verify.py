"""Reward: 1 when the extracted answer equals the reference, else 0.

An integer reference (the report's RL data is integer-only) is compared in-process in
microseconds, and a prediction that is not an integer is simply wrong. Any other reference goes
to ``math-verify`` in a process pool: its timeouts use ``signal.alarm``,
which needs a main thread, and a pathological expression must not stall the trainer. A call
past ``timeout_s`` scores 0, is counted, and the pool is replaced.
"""

import asyncio
import logging
import multiprocessing
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from trainer.core.answer import Strictness, extract_answer

logger = logging.getLogger(__name__)

_NOISE_RE = re.compile(r"\s+|\$|\\[,!;: ]|\\text\{\s*\}")
_THOUSANDS_RE = re.compile(r"[+-]?\d{1,3}(?:(?:,|\{,\})\d{3})+")
_INTEGER_RE = re.compile(r"[+-]?\d+")
POOL_START_GRACE_S = 60.0


class Verdict(StrEnum):
    """How an answer was judged."""

    CORRECT = "correct"
    WRONG = "wrong"
    NO_ANSWER = "no_answer"
    TIMEOUT = "timeout"


@dataclass(frozen=True)
class Score:
    """Reward and how it was decided (``integer``, ``math_verify`` or ``none``)."""

    reward: float
    verdict: Verdict
    method: str


def as_integer(text: str) -> int | None:
    """``text`` as an integer when it is one (spaces, ``$`` and thousands commas allowed)."""
    cleaned = _NOISE_RE.sub("", text)
    if _THOUSANDS_RE.fullmatch(cleaned):
        cleaned = cleaned.replace("{,}", "").replace(",", "")
    return int(cleaned) if _INTEGER_RE.fullmatch(cleaned) else None


def math_verify_equal(predicted: str, reference: str, timeout_s: int) -> bool:
    """``math-verify``'s verdict on two LaTeX answers; runs inside a pool process."""
    from math_verify import parse, verify

    gold = parse(f"$\\boxed{{{reference}}}$", parsing_timeout=timeout_s)
    guess = parse(f"$\\boxed{{{predicted}}}$", parsing_timeout=timeout_s)
    return bool(verify(gold, guess, timeout_seconds=timeout_s))


def _warm_up() -> bool:
    import math_verify  # noqa: F401  (the first import costs about a second)

    return True


class AnswerVerifier:
    """Scores rollouts; ``close()`` stops its pool (started only when first needed)."""

    def __init__(
        self, strictness: Strictness = "strict", timeout_s: float = 5.0, max_workers: int = 2
    ) -> None:
        self.strictness = strictness
        self.timeout_s = timeout_s
        self.max_workers = max_workers
        self.timeouts = 0
        self.check: Callable[[str, str, int], bool] = math_verify_equal  # runs in the pool
        self._pool: ProcessPoolExecutor | None = None
        self._pool_lock = asyncio.Lock()

    async def score(self, text: str, reference: str) -> Score:
        """Reward of the model's ``text`` against the ``reference`` answer."""
        predicted = extract_answer(text, self.strictness)
        if predicted is None:
            return Score(0.0, Verdict.NO_ANSWER, "none")
        reference_int = as_integer(reference)
        if reference_int is not None:  # integer references (the report's RL data) stop here
            return _score(as_integer(predicted) == reference_int, "integer")
        return await self._math_verify(predicted, reference)

    async def score_many(self, texts: Sequence[str], references: Sequence[str]) -> list[Score]:
        """Scores pairs concurrently; order kept."""
        pairs = zip(texts, references, strict=True)
        return list(await asyncio.gather(*(self.score(t, r) for t, r in pairs)))

    def close(self) -> None:
        """Stops the pool's processes."""
        if self._pool is not None:
            _kill_pool(self._pool)
            self._pool = None

    async def _math_verify(self, predicted: str, reference: str) -> Score:
        pool = await self._ensure_pool()
        loop = asyncio.get_running_loop()
        timeout_whole_s = max(1, round(self.timeout_s))
        call = loop.run_in_executor(pool, self.check, predicted, reference, timeout_whole_s)
        try:
            equal = await asyncio.wait_for(call, self.timeout_s + 1.0)
        except TimeoutError:
            self.timeouts += 1
            logger.warning("math-verify timed out on %r vs %r", predicted[:80], reference[:80])
            self._replace_pool(pool)
            return Score(0.0, Verdict.TIMEOUT, "math_verify")
        return _score(equal, "math_verify")

    async def _ensure_pool(self) -> ProcessPoolExecutor:
        async with self._pool_lock:
            if self._pool is None:
                context = multiprocessing.get_context("spawn")  # no fork of a torch process
                pool = ProcessPoolExecutor(self.max_workers, mp_context=context)
                loop = asyncio.get_running_loop()
                warm = [loop.run_in_executor(pool, _warm_up) for _ in range(self.max_workers)]
                await asyncio.wait_for(asyncio.gather(*warm), POOL_START_GRACE_S)
                self._pool = pool
            return self._pool

    def _replace_pool(self, pool: ProcessPoolExecutor) -> None:
        if self._pool is pool:
            self._pool = None
        _kill_pool(pool)


def _score(equal: bool, method: str) -> Score:
    return Score(float(equal), Verdict.CORRECT if equal else Verdict.WRONG, method)


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    # A verifier stuck in C code ignores its alarm: kill the workers, not just the queue.
    processes: dict[Any, Any] = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        process.kill()
    pool.shutdown(wait=False, cancel_futures=True)
