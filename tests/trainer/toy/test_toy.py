"""The toy pieces: tokenizer, demonstrations, the warm-start script and its fixture."""

import random
from collections import Counter
from pathlib import Path

import torch

from trainer.core.chat import ChatFormat
from trainer.core.tool_calls import CodeCall, parse_tool_calls
from trainer.local.config import PRESETS
from trainer.local.setup import HFTokenizer, load_tokenizer
from trainer.toy.task import demonstration, question, tool_call, write_dataset
from trainer.toy.tokenizer import UNK, build_tokenizer
from trainer.toy.warmstart import WarmStartConfig, encode_segments, train_warm_start

FIXTURE = Path(PRESETS["toy"].model)


def test_tokenizer_round_trips_the_task_and_shrinks_unknown_text() -> None:
    tokenizer = HFTokenizer(build_tokenizer())
    text = ChatFormat().prompt(question(12, 34)) + tool_call("print", 12, 34) + "<|im_end|>"
    assert tokenizer.decode(tokenizer.encode(text)) == text
    assert parse_tool_calls(text) == [CodeCall("print(12*34)")]
    ids = tokenizer.encode("Traceback, most recent call last:\nNameError")
    assert [tokenizer.decode([i]) for i in ids] == [UNK, "\n", "NameError"]


def test_demonstrations_train_only_on_model_turns() -> None:
    tokenizer = build_tokenizer()
    segments = demonstration(12, 34, "fix", random.Random(0))
    trained = "".join(text for text, on in segments if on)
    assert "prnt(12*34)" in trained and "print(12*34)" in trained
    assert "<answer>\\boxed{408}</answer>" in trained
    assert "NameError" in "".join(text for text, on in segments if not on)
    ids, mask = encode_segments(tokenizer, segments)
    assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)


def test_dataset_lines(tmp_path: Path) -> None:
    path = write_dataset(tmp_path / "d.jsonl", 5, seed=0)
    assert len(path.read_text().splitlines()) == 5


def test_warm_start_script_lowers_its_loss_and_saves_a_loadable_model(tmp_path: Path) -> None:
    model, tokenizer = train_warm_start(WarmStartConfig(steps=30, batch_size=8))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = load_tokenizer(tmp_path)
    assert loaded.encode("Q:12*34=", add_special_tokens=False) == tokenizer.encode(
        "Q:12*34=", add_special_tokens=False
    )


def test_the_fixture_calls_the_tool_and_also_guesses() -> None:
    """RL builds on this mix: some direct guesses, some clean calls, some misspelt ones."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(FIXTURE)).eval()
    tokenizer = HFTokenizer(load_tokenizer(FIXTURE))
    rng = random.Random(0)
    prompts = [tokenizer.encode(ChatFormat().prompt(question(rng.randint(10, 99), 7)))
               for _ in range(64)]  # fmt: skip
    torch.manual_seed(0)
    out = model.generate(input_ids=torch.tensor(prompts), do_sample=True, top_k=0,
                         max_new_tokens=3, pad_token_id=0)  # fmt: skip
    starts = Counter(tokenizer.decode(row[len(prompts[0]) :]) for row in out.tolist())
    kinds = Counter("prnt" if "prnt(" in s else "print" if "print(" in s else "answer"
                    if "<answer>" in s else "other" for s in starts.elements())  # fmt: skip
    assert kinds["print"] >= 8 and kinds["prnt"] >= 4 and kinds["answer"] >= 16, kinds
