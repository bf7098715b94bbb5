"""A word-level tokenizer built in code: the few pieces the toy task needs, no download.

Text between known pieces becomes one ``<unk>`` token, so a traceback costs a handful of
tokens. Tool calls stay real JSON inside ``<tool_call>``, so the production parser runs as is.
"""

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD = "<pad>"
UNK = "<unk>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
CALL_HEAD = '{"name":"python","arguments":{"code":"'
CALL_TAIL = '"}}'
PIECES = (
    PAD, UNK, IM_START, IM_END, "user", "assistant", "\n", "Q:", "=", "*",
    "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>",
    "<answer>", "</answer>", "\\boxed{", "}", CALL_HEAD, CALL_TAIL,
    "print(", "prnt(", ")", "NameError", *"0123456789",
)  # fmt: skip


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The toy tokenizer: ids follow ``PIECES``; EOS is ``<|im_end|>``."""
    vocab = {piece: index for index, piece in enumerate(PIECES)}
    alternation = "|".join(_escape(p) for p in sorted(PIECES, key=len, reverse=True))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(alternation), behavior="isolated")
    core.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        unk_token=UNK,
        eos_token=IM_END,
        additional_special_tokens=[IM_START],
        clean_up_tokenization_spaces=False,
    )


def _escape(piece: str) -> str:
    return "".join("\\" + c if not c.isalnum() and c != "\n" else c for c in piece).replace(
        "\n", "\\n"
    )
