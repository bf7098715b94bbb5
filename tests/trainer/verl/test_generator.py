"""VerlGenerator: the core loop's generator over verl's server client, and log-prob alignment."""

from pathlib import Path

import pytest
from transformers import AutoTokenizer

from tests.trainer.verl.conftest import run_async
from tests.trainer.verl.scripted import END, LOGPROB, ScriptedServer
from trainer.core.agent_loop import GenerationRequest
from trainer.verl.generator import HFTextCodec, VerlGenerator, response_logprobs


@pytest.fixture(scope="module")
def codec(model_dir: Path) -> HFTextCodec:
    return HFTextCodec(AutoTokenizer.from_pretrained(model_dir))


def prompt(codec: HFTextCodec, marker: str) -> list[int]:
    return codec.encode(f"<|im_start|>user\n{marker}{END}\n<|im_start|>assistant\n")


def test_codec_round_trips_text_with_chat_markers(codec: HFTextCodec) -> None:
    text = '<|im_start|>user\n<tool_call>{"code": "print(1)"}</tool_call> é€<|im_end|>\n'
    ids = codec.encode(text)
    assert codec.decode(ids) == text
    assert codec.token_id(END) is not None and ids.count(codec.token_id(END)) == 1


def test_a_turn_ending_with_the_stop_token_is_complete(codec: HFTextCodec) -> None:
    server = ScriptedServer(codec, {"Q1": ["hello"]})
    end_id = codec.token_id(END)
    assert end_id is not None
    generator = VerlGenerator(server, {"temperature": 1.0, "logprobs": True}, [end_id])
    generation = run_async(generator.generate(GenerationRequest(prompt(codec, "Q1"), 100)))
    assert generation.stopped
    assert codec.decode(generation.token_ids) == "hello" + END
    params = server.calls[0]["params"]
    assert params["max_tokens"] == 100 and params["stop_token_ids"] == [end_id]
    assert params["temperature"] == 1.0 and params["logprobs"] is True
    assert generator.turn_logprobs == [[LOGPROB] * len(generation.token_ids)]


def test_a_turn_cut_by_the_token_limit_is_not_complete(codec: HFTextCodec) -> None:
    end_id = codec.token_id(END)
    assert end_id is not None
    generator = VerlGenerator(ScriptedServer(codec, {"Q1": ["hello"]}), {}, [end_id])
    generation = run_async(generator.generate(GenerationRequest(prompt(codec, "Q1"), 3)))
    assert not generation.stopped
    assert codec.decode(generation.token_ids) == "hel"


def test_every_turn_of_a_rollout_uses_one_request_id(codec: HFTextCodec) -> None:
    end_id = codec.token_id(END)
    assert end_id is not None
    server = ScriptedServer(codec, {"Q1": ["a", "b"]})
    generator = VerlGenerator(server, {}, [end_id])
    context = prompt(codec, "Q1")
    first = run_async(generator.generate(GenerationRequest(context, 50)))
    context = context + first.token_ids + codec.encode("\n<|im_start|>assistant\n")
    run_async(generator.generate(GenerationRequest(context, 50)))
    assert len({call["request_id"] for call in server.calls}) == 1
    assert VerlGenerator(server, {}, [end_id]).request_id != generator.request_id


def test_logprobs_follow_model_tokens_and_are_zero_on_tool_tokens() -> None:
    mask = [1, 1, 0, 0, 0, 1]
    assert response_logprobs(mask, [[-0.1, -0.2], [-0.3]]) == [-0.1, -0.2, 0.0, 0.0, 0.0, -0.3]
    assert response_logprobs(mask, [[-0.1, -0.2]]) is None  # they must cover every model token
    assert response_logprobs(mask, None) is None
