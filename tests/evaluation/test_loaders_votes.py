"""Votes JSONL: round trip, crash-cut last line, resume ids, and faults naming file, line, field."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import DatasetError, VotesWriter, done_ids, load, read_votes
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def _items(n: int = 6) -> list[JudgedItem]:
    items = []
    for k in range(n):
        item = PairwiseItem(id=f"q{k}", question=f"question {k}\nwith a newline", answer_a="a", answer_b="b", label="A")
        votes = [
            JudgeVote.from_p_a("judge-1", "logprob", 0.2 + 0.1 * k, signals={"margin": 1.5}),
            JudgeVote.invalid("judge-2", "sc", "unparseable", raw="??"),
            JudgeVote(judge="judge-3", mode="mp", choice="B", confidence=0.7, samples=["B", "A", None]),
        ]
        items.append(JudgedItem(item=item, votes=votes))
    return items


def test_round_trip_crash_and_resume(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "run" / "votes.jsonl"
    items = _items()
    with VotesWriter(path) as writer:
        for judged in items[:4]:
            writer.write(judged)
    assert read_votes(path) == items[:4]
    assert path.read_bytes().count(b"\n") == 4
    # A crash while writing the fifth line: half of it reached the disk.
    line = items[4].model_dump_json().encode()
    with path.open("ab") as handle:
        handle.write(line[: len(line) // 2])
    notes: list[str] = []
    with caplog.at_level(logging.WARNING):
        assert read_votes(path, notes=notes) == items[:4]
    assert len(notes) == 1 and f"{path}:5: skipped a cut last line" in notes[0]
    assert notes[0] in caplog.text
    assert done_ids(path) == {"q0", "q1", "q2", "q3"}
    # Resume: the writer repairs the tail, then appends what was not done.
    with VotesWriter(path) as writer:
        assert writer.notes and "cut" in writer.notes[0]
        for judged in items:
            if judged.item.id not in done_ids(path):
                writer.write(judged)
    notes = []
    assert read_votes(path, notes=notes) == items and notes == []
    assert load(path) == items  # detected as votes by the first record's keys


def test_missing_file_has_no_done_ids(tmp_path: Path) -> None:
    assert done_ids(tmp_path / "none.jsonl") == set()


def test_whole_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    items = _items(3)
    path.write_text("\n".join(j.model_dump_json() for j in items))  # no final newline
    assert read_votes(path) == items
    with VotesWriter(path) as writer:
        assert "newline added" in writer.notes[0]
        writer.write(_items(4)[3])
    assert read_votes(path) == _items(4)


def test_a_refused_item_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    with VotesWriter(path) as writer:
        writer.write(_items(1)[0])
        bad = json.loads(_items(2)[1].model_dump_json())
        bad["votes"][0]["confidence"] = 1.7
        with pytest.raises(ValueError):
            writer.write(bad)
    assert read_votes(path) == _items(1)


def _write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines))


def _good(k: int) -> dict:
    return json.loads(_items(k + 1)[k].model_dump_json())


def test_confidence_out_of_range(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bad = _good(1)
    bad["votes"][2]["confidence"] = 1.7
    _write_lines(path, [json.dumps(_good(0)), json.dumps(bad), json.dumps(_good(2))])
    with pytest.raises(DatasetError) as info:
        read_votes(path)
    err = info.value
    assert (err.path, err.line, err.field) == (path, 2, "votes[2].confidence")
    assert str(err) == f"{path}:2: field 'votes[2].confidence': must be <= 1 (got 1.7)"


def test_malformed_json_in_the_middle_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    good = json.dumps(_good(0))
    _write_lines(path, [good, good[:40], json.dumps(_good(2))])
    with pytest.raises(DatasetError, match="malformed JSON") as info:
        read_votes(path)
    assert (info.value.line, info.value.field) == (2, None)
    assert str(info.value).startswith(f"{path}:2: malformed JSON")


def test_cut_last_line_that_ends_with_newline_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    good = json.dumps(_good(0))
    _write_lines(path, [good, json.dumps(_good(1))[:30]])  # newline written: not a crash mid-line
    with pytest.raises(DatasetError, match=":2: malformed JSON"):
        read_votes(path)


def test_unknown_label(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bad = _good(0)
    bad["item"]["label"] = "C"
    _write_lines(path, [json.dumps(bad)])
    with pytest.raises(DatasetError) as info:
        read_votes(path)
    assert (info.value.line, info.value.field) == (1, "item.label")
    assert "'C'" in str(info.value)


def test_missing_required_key(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    bad = _good(0)
    del bad["votes"][0]["judge"]
    _write_lines(path, [json.dumps(_good(1)), json.dumps(bad)])
    with pytest.raises(DatasetError, match=r":2: field 'votes\[0\].judge': required key is missing"):
        read_votes(path)


def test_duplicate_id(tmp_path: Path) -> None:
    path = tmp_path / "votes.jsonl"
    _write_lines(path, [json.dumps(_good(0)), json.dumps(_good(0))])
    with pytest.raises(DatasetError, match=r":2: field 'item.id': duplicate item id 'q0' \(first at line 1\)"):
        read_votes(path)


def test_real_items_round_trip(shared_data: Path, tmp_path: Path) -> None:
    items = load(shared_data / "trust_or_escalate")
    path = tmp_path / "toe.votes.jsonl"
    with VotesWriter(path) as writer:
        writer.write_all(items)
    assert read_votes(path) == items
