"""LLMBar loader: items keyed by (subset, idx), one judge per (base LLM, strategy), agreement rule."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import DatasetError, UndefinedAnswers, load, load_llmbar

DECISIONS = "llmbar_decisions_compact.jsonl"


@pytest.fixture(scope="module")
def llmbar(shared_data: Path):
    return load_llmbar(shared_data / "llmbar")


@pytest.fixture(scope="module")
def rows(shared_data: Path) -> list[dict]:
    return [json.loads(line) for line in (shared_data / "llmbar" / DECISIONS).read_text().splitlines()]


def test_counts(llmbar, rows) -> None:
    assert len(llmbar) == 1200
    judges = {v.judge for j in llmbar for v in j.votes}
    assert len(judges) == 65 == len({(r["base_llm"], r["strategy"]) for r in rows})
    assert "GPT-4/Vanilla" in judges
    assert sum(len(j.votes) for j in llmbar) == 40413
    errors = Counter(v.error for j in llmbar for v in j.votes)
    assert errors == {None: 26323, "position inconsistent": 13863, "no decision": 121, "one order missing": 106}
    assert Counter(j.item.category for j in llmbar)["LLMBar/Adversarial/Neighbor"] == 134
    assert len({j.item.id for j in llmbar}) == 1200


def test_items_follow_the_dataset_files(llmbar, shared_data: Path) -> None:
    by_id = {j.item.id: j.item for j in llmbar}
    for subset in ("LLMBar/Natural", "Processed/LLMEval^2"):
        records = json.loads((shared_data / "llmbar" / "Dataset" / subset / "dataset.json").read_text())
        for idx in (0, len(records) - 1):
            item = by_id[f"{subset}/{idx}"]
            record = records[idx]
            assert (item.question, item.answer_a, item.answer_b) == (record["input"], record["output_1"], record["output_2"])
            assert item.label == ("A" if int(record["label"]) == 1 else "B")
            assert item.category == subset


def _vote(llmbar, subset: str, idx: int, judge: str):
    judged = next(j for j in llmbar if j.item.id == f"{subset}/{idx}")
    return next(v for v in judged.votes if v.judge == judge)


def test_one_vote_by_hand_against_the_raw_rows(llmbar, rows) -> None:
    # An agreeing row: both orders name the same output.
    row = next(
        r for r in rows if r["base_llm"] == "GPT-4" and r["strategy"] == "Vanilla" and r["winner_swap_false"] == r["winner_swap_true"] == "2"
    )
    vote = _vote(llmbar, row["subset"], row["idx"], "GPT-4/Vanilla")
    assert (vote.choice, vote.p_a, vote.confidence, vote.error) == ("B", 0.25, 0.75, None)  # (0 + 1) / (2 + 2)
    assert vote.samples == ["B", "B"] and vote.mode == "recorded"
    # A disagreeing row with ratings (equal ratings come out as "2" then "1"): invalid, p_a 1/2,
    # the rating margin kept.
    row = next(
        r
        for r in rows
        if r["strategy"] == "Rating" and r["winner_swap_false"] == "2" and r["winner_swap_true"] == "1" and r["score_1"]
    )
    vote = _vote(llmbar, row["subset"], row["idx"], f"{row['base_llm']}/Rating")
    assert vote.choice is None and vote.error == "position inconsistent" and vote.p_a == 0.5
    assert vote.signals["margin"] == float(row["score_1"]) - float(row["score_2"])
    row = next(r for r in rows if r["strategy"] == "Rating" and r["winner_swap_false"] == r["winner_swap_true"] == "1")
    vote = _vote(llmbar, row["subset"], row["idx"], f"{row['base_llm']}/Rating")
    assert (vote.choice, vote.p_a) == ("A", 0.75)
    assert vote.signals["margin"] == float(row["score_1"]) - float(row["score_2"]) > 0
    # One order missing: invalid, Laplace over the one order.
    row = next(r for r in rows if r["winner_swap_false"] == "1" and r["winner_swap_true"] is None)
    vote = _vote(llmbar, row["subset"], row["idx"], f"{row['base_llm']}/{row['strategy']}")
    assert vote.error == "one order missing" and vote.p_a == pytest.approx(2 / 3)


def test_loading_everything_is_fast(shared_data: Path) -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    items = load(shared_data / "llmbar")
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"llmbar: {len(items)} items loaded in {wall:.2f} s wall, {cpu:.2f} s CPU")
    # CPU time, so that other processes on a shared machine cannot make this flaky.
    assert cpu < 3.0


def _cut(shared_data: Path, tmp_path: Path, n: int = 5) -> Path:
    """LLMBar (MIT) Natural items 0-2 and the first n decision rows on them, copied to tmp_path."""
    src = shared_data / "llmbar"
    folder = tmp_path / "Dataset" / "LLMBar" / "Natural"
    folder.mkdir(parents=True)
    records = json.loads((src / "Dataset" / "LLMBar" / "Natural" / "dataset.json").read_text())[:3]
    (folder / "dataset.json").write_text(json.dumps(records))
    picked = []
    for line in (src / DECISIONS).read_text().splitlines():
        row = json.loads(line)
        if row["subset"] == "LLMBar/Natural" and row["idx"] < 3:
            picked.append(line)
            if len(picked) == n:
                break
    (tmp_path / DECISIONS).write_text("\n".join(picked) + "\n")
    return tmp_path


def _edit(path: Path, line: int, change) -> None:
    lines = path.read_text().splitlines(keepends=True)
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record) + "\n"
    path.write_text("".join(lines))


def test_small_cut(shared_data: Path, tmp_path: Path) -> None:
    root = _cut(shared_data, tmp_path)
    items = load(root)
    assert 1 <= len(items) <= 3 and sum(len(j.votes) for j in items) == 5


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        (lambda r: r.update(winner_swap_true="3"), "winner_swap_true", "undefined answer '3'"),
        (lambda r: r.update(subset="LLMBar/Nope"), "subset", "no dataset file for subset 'LLMBar/Nope'"),
        (lambda r: r.update(label=3 - r["label"]), "label", "disagrees with the dataset file"),
        (lambda r: r.update(label="C"), "label", "unknown label 'C'"),
        (lambda r: r.update(label=[1]), "label", "unknown label [1]"),
        (lambda r: r.update(label=True), "label", "unknown label True"),
        (lambda r: r.update(idx=99), "idx", "no item 99"),
        (lambda r: r.pop("strategy"), "strategy", "required key is missing"),
        (lambda r: r.update(score_1="ten"), "score_1", "must be a number"),
    ],
)
def test_faults_name_file_line_field(shared_data: Path, tmp_path: Path, change, field: str, message: str) -> None:
    root = _cut(shared_data, tmp_path)
    decisions = root / DECISIONS
    _edit(decisions, 4, lambda r: (r.update(score_1="1", score_2="2"), change(r)))
    with pytest.raises(DatasetError) as info:
        load_llmbar(root, answers=UndefinedAnswers(strict=True))
    err = info.value
    assert (err.path, err.line, err.field) == (decisions, 4, field)
    assert str(err).startswith(f"{decisions}:4: field '{field}': {message}")


def test_undefined_winner_is_an_invalid_vote_by_default(shared_data: Path, tmp_path: Path) -> None:
    root = _cut(shared_data, tmp_path)
    decisions = root / DECISIONS
    row = json.loads(decisions.read_text().splitlines()[3])
    _edit(decisions, 4, lambda r: r.update(winner_swap_true="3"))
    answers = UndefinedAnswers()
    items = load_llmbar(root, answers=answers)
    judge = f"{row['base_llm']}/{row['strategy']}"
    (vote,) = [v for j in items if j.item.id == f"{row['subset']}/{row['idx']}" for v in j.votes if v.judge == judge]
    assert vote.choice is None and vote.error == "undefined answer '3' in winner_swap_true"
    assert answers.per_judge() == {judge: 1} and answers.found[0].line == 4
