"""Format detection and ``load`` over every source, with load times printed (run with -s)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import FORMATS, DatasetError, VotesWriter, detect_format, load


@pytest.mark.parametrize(
    ("relative", "expected"),
    [
        ("judgebench", "judgebench"),
        ("judgebench/outputs", "judgebench"),
        ("judgebench/dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl", "judgebench"),
        ("llmbar", "llmbar"),
        ("llmbar/llmbar_decisions_compact.jsonl", "llmbar"),
        ("llmbar/Dataset", "llmbar"),
        ("trust_or_escalate", "toe"),
        ("trust_or_escalate/gpt-4-turbo.calibration.jsonl", "toe"),
    ],
)
def test_detects_the_real_sources(shared_data: Path, relative: str, expected: str) -> None:
    assert detect_format(shared_data / relative) == expected


def test_detects_by_first_record_keys(shared_data: Path, tmp_path: Path) -> None:
    src = shared_data / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"
    renamed = tmp_path / "renamed.jsonl"
    renamed.write_text(src.read_text().splitlines(keepends=True)[0])
    assert detect_format(renamed) == "toe"
    arena = next((shared_data / "judgebench" / "outputs").glob("*arena_hard*"))
    (tmp_path / "o1.jsonl").write_text(arena.read_text().splitlines(keepends=True)[0])
    assert detect_format(tmp_path / "o1.jsonl") == "judgebench"
    votes = tmp_path / "votes.jsonl"
    with VotesWriter(votes) as writer:
        writer.write_all(load(src)[:2])
    assert detect_format(votes) == "votes"
    assert detect_format([votes, tmp_path / "votes.jsonl"]) == "votes"


def test_cannot_tell(tmp_path: Path, shared_data: Path) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"foo": 1}\n')
    with pytest.raises(DatasetError, match="cannot tell the format") as info:
        load(odd)
    assert info.value.path == odd
    with pytest.raises(DatasetError, match="paths of different formats"):
        detect_format([shared_data / "llmbar", shared_data / "trust_or_escalate"])
    with pytest.raises(DatasetError, match="no such file"):
        detect_format(tmp_path / "missing.jsonl")
    with pytest.raises(ValueError, match="unknown format"):
        load(odd, format="parquet")


def test_format_given_overrides_detection(shared_data: Path, tmp_path: Path) -> None:
    src = shared_data / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"
    renamed = tmp_path / "judge.jsonl"
    renamed.write_text(src.read_text())
    items = load([renamed], format="toe")
    assert len(items) == 500 and items[0].votes[0].judge == "judge"


def test_load_every_source_and_time_it(shared_data: Path) -> None:
    expected = {"judgebench": (350, 10), "llmbar": (1200, 65), "trust_or_escalate": (500, 3)}
    for folder, (n_items, n_judges) in expected.items():
        started = time.perf_counter()
        items = load(shared_data / folder)
        elapsed = time.perf_counter() - started
        judges = {v.judge for j in items for v in j.votes}
        invalid = sum(not v.valid for j in items for v in j.votes)
        print(f"{folder}: {len(items)} items, {len(judges)} judges, {invalid} invalid votes, {elapsed:.2f} s")
        assert (len(items), len(judges)) == (n_items, n_judges)
        ids = [j.item.id for j in items]
        assert len(set(ids)) == len(ids)
        assert ids == [j.item.id for j in load(shared_data / folder)]  # stable order


def test_formats_constant() -> None:
    assert FORMATS == ("judgebench", "llmbar", "toe", "votes", "csv")


def test_a_csv_file_or_folder_is_csv(tmp_path: Path) -> None:
    (tmp_path / "pairs.csv").write_text("question,answer_a,answer_b,label\nq,a,b,tie\n", encoding="utf-8")
    (tmp_path / "upper").mkdir()
    (tmp_path / "upper" / "PAIRS.CSV").write_text("question,answer_a,answer_b\n", encoding="utf-8")
    assert detect_format(tmp_path / "upper" / "PAIRS.CSV") == "csv"
    assert detect_format(tmp_path / "pairs.csv") == "csv"
    assert detect_format(tmp_path) == "csv"
    assert [judged.item.outcome for judged in load(tmp_path)] == ["tie"]
