"""Reward: the integer fast path, math-verify in a pool, the per-item timeout."""

import time

from trainer.core.verify import AnswerVerifier, Verdict, as_integer


def test_as_integer_accepts_integer_spellings_only() -> None:
    assert as_integer(" 1,234 ") == 1234
    assert as_integer("$-42$") == -42
    assert as_integer("1{,}000") == 1000
    assert as_integer("1\\,000") == 1000
    assert as_integer("1,2") is None
    assert as_integer("1/2") is None
    assert as_integer("3.0") is None


async def test_integer_fast_path_needs_no_pool() -> None:
    verifier = AnswerVerifier()
    right = await verifier.score("<answer>so \\boxed{1,476}</answer>", "1476")
    wrong = await verifier.score("<answer>\\boxed{1477}</answer>", "1476")
    missing = await verifier.score("\\boxed{1476}", "1476")
    not_integer = await verifier.score("<answer>\\boxed{\\frac{2952}{2}}</answer>", "1476")
    assert (not_integer.reward, not_integer.method) == (0.0, "integer")
    assert (right.reward, right.verdict, right.method) == (1.0, Verdict.CORRECT, "integer")
    assert (wrong.reward, wrong.verdict) == (0.0, Verdict.WRONG)
    assert (missing.reward, missing.verdict) == (0.0, Verdict.NO_ANSWER)
    assert verifier._pool is None


async def test_lenient_mode_reads_a_box_outside_the_answer() -> None:
    score = await AnswerVerifier("lenient").score("\\boxed{1476}", "1476")
    assert score.reward == 1.0


async def test_math_verify_judges_equivalent_forms() -> None:
    verifier = AnswerVerifier(timeout_s=5.0, max_workers=1)
    try:
        scores = await verifier.score_many(
            ["<answer>\\boxed{\\frac{1}{2}}</answer>", "<answer>\\boxed{(a+c)(c+b)(b+a)}</answer>",
             "<answer>\\boxed{\\frac{1}{3}}</answer>"],
            ["0.5", "(a+b)(b+c)(c+a)", "0.5"],
        )  # fmt: skip
    finally:
        verifier.close()
    assert [s.reward for s in scores] == [1.0, 1.0, 0.0]
    assert {s.method for s in scores} == {"math_verify"}


def slow_check(predicted: str, reference: str, timeout_s: int) -> bool:
    """Stands for a verification that hangs (runs in the pool process)."""
    time.sleep(30)
    return True


async def test_a_verification_past_its_timeout_scores_zero_and_is_counted() -> None:
    verifier = AnswerVerifier(timeout_s=0.5, max_workers=1)
    verifier.check = slow_check
    try:
        started_s = time.perf_counter()
        score = await verifier.score("<answer>\\boxed{x}</answer>", "y")
        assert time.perf_counter() - started_s < 10
        assert (score.reward, score.verdict) == (0.0, Verdict.TIMEOUT)
        assert verifier.timeouts == 1
        assert verifier._pool is None  # the stuck worker was killed with its pool
    finally:
        verifier.close()
