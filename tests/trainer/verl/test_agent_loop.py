"""The codepool agent loop inside verl's own AgentLoopWorker, with a real ``codepool serve``.

verl's worker looks the loop up in its registry (our agent_loop.yaml), builds it per
trajectory, and pads and stacks its outputs into the batch the trainer sees; only the
inference server is scripted (vLLM/SGLang need GPUs).
"""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.trainer.verl.conftest import run_async
from tests.trainer.verl.scripted import END, LOGPROB, ScriptedServer
from trainer.core.chat import ChatFormat
from trainer.verl import fields
from trainer.verl.data import verl_row
from trainer.verl.generator import HFTextCodec
from trainer.verl.resources import close_shared_resources

PROMPT_LENGTH = 128
RESPONSE_LENGTH = 512
CALL = '<tool_call>{"name": "python", "arguments": {"code": "%s"}}</tool_call>'
SCRIPT = {
    "Q-tool": [CALL % "print(6*7)", r"<answer>\boxed{42}</answer>"],
    "Q-error": [CALL % "print(1/0)", r"<answer>\boxed{7}</answer>"],
    "Q-invalid": [
        '<tool_call>{"name": "python", "arguments": </tool_call>',
        r"<answer>\boxed{3}</answer>",
    ],
    "Q-direct": [r"<answer>\boxed{12}</answer>"],
}
GOLD = {"Q-tool": "42", "Q-error": "7", "Q-invalid": "5", "Q-direct": "12"}
COLUMNS = {"raw_prompt": "prompt", "reward_model": "reward_model", "agent_name": "agent_name"}


def object_column(values: list[Any]) -> np.ndarray:
    """A 1-D object array (numpy would make lists of messages a 2-D array)."""
    column = np.empty(len(values), dtype=object)
    column[:] = values
    return column


@pytest.fixture(scope="module")
def generated(compose: Any, model_dir: Path, codepool_url: str) -> tuple[Any, HFTextCodec]:
    """verl's worker output for one rollout of each scripted prompt."""
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    config = compose(
        "single_node",
        [
            f"actor_rollout_ref.model.path={model_dir}",
            f"codepool.service_url={codepool_url}",
            f"data.max_prompt_length={PROMPT_LENGTH}",
            f"data.max_response_length={RESPONSE_LENGTH}",
            "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
        ],
    )
    worker = AgentLoopWorker(config, llm_client=None)
    codec = HFTextCodec(worker.tokenizer)
    server = ScriptedServer(codec, SCRIPT)
    worker.llm_client = server
    rows = [verl_row({"prompt": q, "answer": GOLD[q]}, i) for i, q in enumerate(SCRIPT)]
    batch = DataProto.from_single_dict(
        {key: object_column([row[name] for row in rows]) for key, name in COLUMNS.items()}
    )

    async def generate() -> Any:
        try:
            return await worker.generate_sequences(batch)
        finally:
            await close_shared_resources()

    return run_async(generate()), codec


def row_of(output: Any, marker: str) -> int:
    return list(SCRIPT).index(marker)


def response(output: Any, row: int) -> tuple[list[int], list[int]]:
    """The unpadded response ids and mask of one row."""
    length = int(output.batch["attention_mask"][row, PROMPT_LENGTH:].sum())
    ids = output.batch["responses"][row, :length].tolist()
    mask = output.batch["response_mask"][row, :length].tolist()
    assert output.batch["response_mask"][row, length:].sum() == 0
    return ids, mask


def test_prompt_ids_are_the_chat_template_left_padded(generated: tuple[Any, HFTextCodec]) -> None:
    output, codec = generated
    for row, marker in enumerate(SCRIPT):
        attention = output.batch["attention_mask"][row, :PROMPT_LENGTH].bool()
        prompt = output.batch["prompts"][row][attention].tolist()
        assert codec.decode(prompt) == f"<|im_start|>user\n{marker}{END}\n<|im_start|>assistant\n"
        assert not attention[: PROMPT_LENGTH - len(prompt)].any()


def test_tool_round_trip_ids_and_mask(generated: tuple[Any, HFTextCodec]) -> None:
    output, codec = generated
    ids, mask = response(output, row_of(output, "Q-tool"))
    first = codec.encode(SCRIPT["Q-tool"][0] + END)
    tool = codec.encode(ChatFormat().tool_turn(["42"]))  # the real sandbox printed 42
    second = codec.encode(SCRIPT["Q-tool"][1] + END)
    assert ids == first + tool + second
    assert mask == [1] * len(first) + [0] * len(tool) + [1] * len(second)


def test_reward_sits_on_the_last_response_token(generated: tuple[Any, HFTextCodec]) -> None:
    output, _ = generated
    expected = {"Q-tool": 1.0, "Q-error": 1.0, "Q-invalid": 0.0, "Q-direct": 1.0}
    for marker, reward in expected.items():
        row = row_of(output, marker)
        length = len(response(output, row)[0])
        scores = output.batch["rm_scores"][row]
        assert scores[length - 1].item() == reward
        assert scores.sum().item() == reward
        assert output.non_tensor_batch[fields.REWARD][row] == reward


def test_tool_statistics_come_from_result_statuses(generated: tuple[Any, HFTextCodec]) -> None:
    output, codec = generated
    columns = output.non_tensor_batch
    expected = {  # calls, errors, p_err, outcome that was counted
        "Q-tool": (1, 0, 0.0, "ok"),
        "Q-error": (1, 1, 1.0, "error"),
        "Q-invalid": (1, 1, 1.0, "invalid_call"),
        "Q-direct": (0, 0, 0.5, None),
    }
    for marker, (calls, errors, p_err, outcome) in expected.items():
        row = row_of(output, marker)
        assert (columns[fields.TOOL_CALLS][row], columns[fields.TOOL_ERRORS][row]) == (
            calls,
            errors,
        )
        assert columns[fields.P_ERR][row] == p_err
        assert columns[fields.P_FORMAT][row] == 0.0  # one answer each
        assert columns[fields.USABLE][row]
        if outcome:
            assert columns[f"{fields.OUTCOME_PREFIX}{outcome}"][row] == 1
    ids, mask = response(output, row_of(output, "Q-error"))
    tool_text = codec.decode([i for i, m in zip(ids, mask, strict=True) if m == 0])
    assert "ZeroDivisionError" in tool_text  # the sandbox's traceback, read back to the model


def test_rollout_logprobs_cover_model_tokens_only(generated: tuple[Any, HFTextCodec]) -> None:
    output, _ = generated
    row = row_of(output, "Q-tool")
    mask = output.batch["response_mask"][row]
    logprobs = output.batch["rollout_log_probs"][row]
    assert torch.all(logprobs[mask == 1] == LOGPROB)
    assert torch.all(logprobs[mask == 0] == 0.0)
    assert output.non_tensor_batch["__num_turns__"][row] == 1 + 2 + 1  # user, 2 model, 1 tool
