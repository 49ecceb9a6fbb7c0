"""Trust-or-Escalate loader: 500 items x 3 judges, p_a = probs[0] / (probs[0] + probs[1]), alignment."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import DatasetError, UndefinedAnswers, load, load_toe

JUDGES = ["gpt-3.5-turbo", "gpt-4-turbo", "mistral-7b-instruct"]


@pytest.fixture(scope="module")
def toe(shared_data: Path):
    return load(shared_data / "trust_or_escalate")


def _file(shared_data: Path, judge: str) -> Path:
    return shared_data / "trust_or_escalate" / f"{judge}.calibration.jsonl"


def test_items_and_judges(toe) -> None:
    assert len(toe) == 500
    assert all([v.judge for v in judged.votes] == JUDGES for judged in toe)
    assert [j.item.id for j in toe] == [f"toe/{n}" for n in range(500)]
    assert sum(j.item.label == "A" for j in toe) == 241
    assert all(v.mode == "recorded" and v.valid for j in toe for v in j.votes)


def test_p_a_by_hand(toe, shared_data: Path) -> None:
    line = _file(shared_data, "gpt-4-turbo").read_text().splitlines()[0]
    record = json.loads(line)
    assert record["probs"] == [0.9944367774186533, 0.005563154035303183]
    vote = toe[0].votes[JUDGES.index("gpt-4-turbo")]
    p_a = 0.9944367774186533 / (0.9944367774186533 + 0.005563154035303183)
    assert vote.p_a == pytest.approx(p_a, abs=1e-15)
    assert (vote.choice, vote.confidence) == ("A", pytest.approx(p_a))
    assert vote.signals["log_odds"] == pytest.approx(math.log(0.9944367774186533 / 0.005563154035303183))
    assert toe[0].item.question == record["instruction"]
    assert (toe[0].item.answer_a, toe[0].item.answer_b) == tuple(record["outputs"])
    assert toe[0].item.label == ("A" if record["preferences"]["human"] == 1 else "B")
    # A "B" vote: its confidence is 1 - p_a.
    vote = next(v for j in toe for v in j.votes if v.choice == "B")
    assert vote.confidence == pytest.approx(1 - vote.p_a)


def _cut(shared_data: Path, tmp_path: Path, n: int = 4) -> list[Path]:
    out = []
    for judge in JUDGES:
        path = tmp_path / f"{judge}.calibration.jsonl"
        path.write_text("".join(_file(shared_data, judge).read_text().splitlines(keepends=True)[:n]))
        out.append(path)
    return out


def _edit(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines))


def test_misaligned_files_are_refused(shared_data: Path, tmp_path: Path) -> None:
    files = _cut(shared_data, tmp_path)
    _edit(files[2], 3, lambda r: r.update(instruction=r["instruction"] + " (edited)"))
    with pytest.raises(DatasetError, match="files do not align: the instruction differs") as info:
        load_toe(files)
    assert (info.value.path, info.value.line, info.value.field) == (files[2], 3, "instruction")
    files = _cut(shared_data, tmp_path)
    files[1].write_text("".join(files[1].read_text().splitlines(keepends=True)[:3]))
    with pytest.raises(DatasetError, match="files do not align: 3 records here, 4 in"):
        load_toe(files)


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda r: r.update(preferences={"human": 3}), "preferences.human", "unknown label 3"),
        (lambda r: r.update(probs=[0.2]), "probs", "must be a list of two probabilities"),
        (lambda r: r.update(probs=[0.0, 0.0]), "probs", "undefined answer [0.0, 0.0]"),
        (lambda r: r.update(probs=[1.7, 0.1]), "probs[0]", "must be in [0, 1] (got 1.7)"),
        (lambda r: r.pop("outputs"), "outputs", "required key is missing"),
    ],
)
def test_faults_name_file_line_field(shared_data: Path, tmp_path: Path, change, field: str, message: str) -> None:
    files = _cut(shared_data, tmp_path)
    for path in files:  # every file, so that alignment is not what fails
        _edit(path, 2, change)
    with pytest.raises(DatasetError) as info:
        load_toe(files, answers=UndefinedAnswers(strict=True))
    err = info.value
    assert (err.path, err.line, err.field) == (files[0], 2, field)
    assert str(err).startswith(f"{files[0]}:2: field '{field}': {message}")


def test_zero_probabilities_are_an_invalid_vote_by_default(shared_data: Path, tmp_path: Path) -> None:
    files = _cut(shared_data, tmp_path)
    _edit(files[1], 2, lambda r: r.update(probs=[0.0, 0.0]))
    answers = UndefinedAnswers()
    items = load_toe(files, answers=answers)
    vote = items[1].votes[1]
    assert vote.choice is None and vote.error == "undefined answer [0.0, 0.0] in probs"
    assert all(v.choice is not None for j in items for v in j.votes if v is not vote)
    assert [(a.path, a.line) for a in answers.found] == [(files[1], 2)]
