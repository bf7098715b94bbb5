"""Answer extraction and answer-tag counts."""

from trainer.core.answer import count_answer_tags, extract_answer, last_boxed


def test_last_boxed_handles_nested_braces() -> None:
    assert last_boxed("\\boxed{1} then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert last_boxed("\\boxed{3} \\boxed{unclosed") == "3"
    assert last_boxed("no box") is None


def test_strict_reads_the_last_box_of_the_last_answer_block() -> None:
    text = "\\boxed{9} <answer>\\boxed{1}</answer> x <answer>a \\boxed{2} b \\boxed{3}</answer>"
    assert extract_answer(text, "strict") == "3"
    assert extract_answer("\\boxed{9} <answer>9</answer>", "strict") is None
    assert extract_answer("\\boxed{9}", "strict") is None


def test_lenient_reads_the_last_box_anywhere() -> None:
    assert extract_answer("<answer>\\boxed{1}</answer> \\boxed{9}", "lenient") == "9"


def test_answer_tag_counts() -> None:
    tags = count_answer_tags("<answer>1</answer><answer>2</answer><answer>3")
    assert (tags.opened, tags.closed_blocks) == (3, 2)
