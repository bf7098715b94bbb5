"""ChatML strings around the model's turns."""

from trainer.core.chat import ChatFormat


def test_prompt_with_and_without_system() -> None:
    chat = ChatFormat()
    assert chat.prompt("Q") == "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    assert chat.prompt("Q", system="S").startswith("<|im_start|>system\nS<|im_end|>\n")


def test_tool_turn_carries_every_response_under_the_user_role() -> None:
    assert ChatFormat().tool_turn(["1", "2"]) == (
        "\n<|im_start|>user\n<tool_response>\n1\n</tool_response>\n"
        "<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
