"""``judgefuse judge`` reads the Hugging Face preference layout (prompt / chosen / rejected, plain or
conversational): the chosen answer is placed at A or B by a hash of the id, never always at A,
and the label follows it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgefuse.evaluation.judge_command import chosen_is_a, read_pairs
from judgefuse.evaluation.loaders import DatasetError


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_plain_and_conversational_layouts(tmp_path: Path) -> None:
    records = [{"id": f"p{i}", "prompt": f"q{i}", "chosen": f"good {i}", "rejected": f"bad {i}", "subset": "math"}
               for i in range(40)]  # fmt: skip
    records.append({
        "chosen": [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": "good chat"}],
        "rejected": [{"role": "user", "content": "hi?"}, {"role": "assistant", "content": "bad chat"}],
    })  # fmt: skip
    items = read_pairs(write(tmp_path / "prefs.jsonl", records))
    assert len(items) == 41
    for item in items:
        chosen = item.answer_a if item.label == "A" else item.answer_b
        assert chosen.startswith("good") and (item.label == "A") == chosen_is_a(item.id)
    placed_a = sum(item.label == "A" for item in items)
    assert 10 < placed_a < 31  # both positions used, roughly half each
    chat = items[-1]
    assert (chat.id, chat.question, chat.category) == ("line-41", "hi?", None)
    assert items[0].category == "math"


def test_missing_rejected_text_names_the_field(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", [{"prompt": "q", "chosen": "a", "rejected": [{"role": "user", "content": "x"}]}])
    with pytest.raises(DatasetError, match="rejected"):
        read_pairs(path)
