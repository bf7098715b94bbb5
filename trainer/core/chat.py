"""The chat format around model turns (ChatML, as Qwen models use) and the tokenizer protocol."""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


class Tokenizer(Protocol):
    """What the agent loop needs of a tokenizer: text to ids and back."""

    def encode(self, text: str) -> list[int]:
        """Ids of ``text`` without special-token additions (no BOS)."""
        ...

    def decode(self, ids: Sequence[int]) -> str:
        """Text of ``ids``, special tokens kept."""
        ...


@dataclass(frozen=True)
class ChatFormat:
    """ChatML strings. A model turn ends with ``end`` (the EOS the generator stops on)."""

    start: str = "<|im_start|>"
    end: str = "<|im_end|>"

    def prompt(self, question: str, system: str | None = None) -> str:
        """The conversation up to the first assistant turn's header."""
        text = f"{self.start}system\n{system}{self.end}\n" if system else ""
        return f"{text}{self.start}user\n{question}{self.end}\n{self.start}assistant\n"

    def tool_turn(self, responses: Sequence[str], turn_closed: bool = True) -> str:
        """A user turn carrying tool responses, then the next assistant header.

        ``turn_closed`` says whether the model's turn already ended with ``end``.
        """
        body = "\n".join(f"<tool_response>\n{r}\n</tool_response>" for r in responses)
        close = "" if turn_closed else self.end
        return f"{close}\n{self.start}user\n{body}{self.end}\n{self.start}assistant\n"
