"""``judgefuse eval`` on a JudgeBench folder whose outputs hold decisions the format does not define.

The fixture is real JudgeBench lines (the first pairs, o1-mini and two reward models; MIT) with a
few games edited to ``"A>A"`` / ``"B>B"``, the kind of answer found in published third-party files.
The expected accuracy is computed here by JudgeBench's own scorer, written out as its
``compute_final_metrics`` does it (flip g2, +1 for the label, -1 for its flip, anything else 0), so
the product's loader and rule are checked against the benchmark, not against themselves.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgefuse.cli import main

PAIRS = "dataset=judgebench,response_model=gpt-4o-2024-05-13.jsonl"
JUDGES = ("arena_hard", "Skywork_Skywork-Reward-Gemma-2-27B", "internlm_internlm2-7b-reward")
N_PAIRS = 24
# (judge file marker, 1-based line, game index, undefined decision)
EDITS = (
    ("arena_hard", 3, 0, "A>A"),  # one game undefined, the other still counts
    ("arena_hard", 5, 0, "A>A"),
    ("arena_hard", 5, 1, "B>B"),  # both games undefined: an invalid vote
    ("internlm2-7b", 7, 1, "B>B"),
)


def _flip(decision):  # JudgeBench's flip_judgment: anything but A>B / B>A is left as it is
    return {"A>B": "B>A", "B>A": "A>B"}.get(decision, decision)


def _judgebench_accuracy(path: Path) -> float:
    correct = 0
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for record in records:
        label = record["label"]
        counter = 0
        for decision in (record["judgments"][0]["decision"], _flip(record["judgments"][1]["decision"])):
            if decision == label:
                counter += 1
            elif decision == _flip(label):
                counter -= 1
        correct += counter > 0
    return correct / len(records)


@pytest.fixture
def edited_folder(shared_data: Path, tmp_path: Path) -> Path:
    src = shared_data / "judgebench"
    folder = tmp_path / "judgebench"
    (folder / "outputs").mkdir(parents=True)
    pairs = (src / PAIRS).read_text(encoding="utf-8").splitlines(keepends=True)[:N_PAIRS]
    (folder / PAIRS).write_text("".join(pairs), encoding="utf-8")
    for marker in JUDGES:
        (source,) = [p for p in (src / "outputs").glob("*.jsonl") if marker in p.name]
        lines = source.read_text(encoding="utf-8").splitlines(keepends=True)[:N_PAIRS]
        for judge, line, game, decision in EDITS:
            if judge in source.name:
                record = json.loads(lines[line - 1])
                record["judgments"][game]["decision"] = decision
                lines[line - 1] = json.dumps(record) + "\n"
        (folder / "outputs" / source.name).write_text("".join(lines), encoding="utf-8")
    return folder


def _run(folder: Path, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "report.json"
    code = main(["eval", str(folder), "--methods", "majority", "--bootstrap", "50", "--quiet", "--json", str(out), *extra])
    return code, (json.loads(out.read_text()) if out.exists() else {})


def test_eval_runs_to_the_end_with_judgebench_accuracy(
    edited_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _run(edited_folder, tmp_path)
    assert code == 0
    rows = {row["name"]: row for row in report["rows"] if row["kind"] == "judge"}
    assert len(rows) == 3
    for path in sorted((edited_folder / "outputs").glob("*.jsonl")):
        (name,) = [n for n in rows if n.split(":", 1)[1].split("-")[0].lower() in path.name.lower()]
        assert rows[name]["accuracy"] == pytest.approx(_judgebench_accuracy(path), abs=1e-12), name
        assert rows[name]["n"] == N_PAIRS
    assert report["undefined_answers"] == {"arena_hard:o1-mini": 3, "reward_model:internlm2-7b-reward": 1}
    assert rows["arena_hard:o1-mini"]["n_invalid"] >= 1  # line 5: both games undefined
    assert rows["arena_hard:o1-mini"]["n_undefined_answers"] == 3
    assert rows["reward_model:Skywork-Reward-Gemma-2-27B"]["n_undefined_answers"] == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if "warning:" in line]
    assert len(warnings) == 2  # one per file with undefined answers
    arena = next(w for w in warnings if "arena_hard" in w)
    assert "3 answers the format does not define" in arena and ".jsonl:3 field 'judgments[0].decision': 'A>A'" in arena


def test_strict_stops_at_the_first_undefined_answer(
    edited_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, report = _run(edited_folder, tmp_path, "--strict")
    assert code == 2 and report == {}
    err = capsys.readouterr().err
    assert "judge_name=arena_hard" in err and ":3: field 'judgments[0].decision': undefined answer 'A>A'" in err


def test_the_edit_changes_what_judgebench_counts(edited_folder: Path, shared_data: Path) -> None:
    """The edited lines matter: without the edits the o1-mini accuracy on these pairs differs."""
    (edited,) = list((edited_folder / "outputs").glob("*arena_hard*"))
    original_lines = (shared_data / "judgebench" / "outputs" / edited.name).read_text().splitlines(keepends=True)
    pristine = edited.parent.parent / "pristine.jsonl"
    pristine.write_text("".join(original_lines[:N_PAIRS]))
    assert _judgebench_accuracy(pristine) != _judgebench_accuracy(edited)


def test_the_table_lists_undefined_answers(edited_folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    assert main(["eval", str(edited_folder), "--methods", "majority", "--bootstrap", "20"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "undefined answers, read as no decision" in out and "o1-mini: 3" in out
