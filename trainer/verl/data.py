"""Datasets for verl: codepool's JSONL (``prompt``, ``answer``) as verl's parquet rows.

verl's ``RLHFDataset`` reads parquet rows with a chat ``prompt`` (a list of messages), a
``data_source``, and ``reward_model.ground_truth``; ``agent_name`` picks the agent loop.
"""

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

AGENT_NAME = "codepool_agent"
DATA_SOURCE = "codepool"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file, blank lines skipped."""
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                record = json.loads(line)
                if not isinstance(record, dict) or "prompt" not in record or "answer" not in record:
                    raise ValueError(f"{path}:{number}: expected an object with prompt and answer")
                yield record


def verl_row(record: Mapping[str, Any], index: int, system_prompt: str = "") -> dict[str, Any]:
    """One dataset row in verl's schema."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    messages.append({"role": "user", "content": str(record["prompt"])})
    return {
        "data_source": str(record.get("data_source", DATA_SOURCE)),
        "prompt": messages,
        "agent_name": AGENT_NAME,
        "reward_model": {"style": "rule", "ground_truth": str(record["answer"])},
        "extra_info": {"index": index},
    }


def write_parquet(rows: Iterable[Mapping[str, Any]], path: Path) -> int:
    """Writes ``rows`` as a parquet file; returns how many."""
    import pandas as pd

    frame = pd.DataFrame(list(rows))
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)
    return len(frame)


def jsonl_to_parquet(source: Path, target: Path, system_prompt: str = "") -> int:
    """Converts codepool's JSONL dataset to verl's parquet; returns the row count."""
    rows = (verl_row(record, i, system_prompt) for i, record in enumerate(read_jsonl(source)))
    return write_parquet(rows, target)
