"""``auto`` in ``judgefuse eval``: a row when asked for, with what it chose in each fold (issue 43)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from judgefuse.cli import main
from judgefuse.evaluation.json_report import to_json
from judgefuse.evaluation.runner import EvaluationOptions, choice_summary, default_methods, evaluate
from judgefuse.fusion import get_method
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def _items(n: int = 300, seed: int = 0) -> list[JudgedItem]:
    """One strong judge among four weak ones, confidence uninformative."""
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        votes = []
        for k, accuracy in enumerate((0.9, 0.6, 0.62, 0.64, 0.66)):
            choice = truth if rng.random() < accuracy else ("B" if truth == "A" else "A")
            votes.append(
                JudgeVote(judge=f"j{k}", mode="sc", choice=choice, confidence=round(float(rng.uniform(0.5, 1)), 4))
            )
        item = PairwiseItem(id=f"i{i}", question="q", answer_a="a", answer_b="b", label=truth)  # type: ignore[arg-type]
        items.append(JudgedItem(item=item, votes=votes))
    return items


def test_auto_is_not_a_default_row_but_runs_when_asked() -> None:
    assert "auto" not in default_methods()
    evaluation = evaluate(_items(), options=EvaluationOptions(methods=("majority", "auto"), n_bootstrap=20))
    row = evaluation.row("auto")
    assert row.row.kind == "fusion" and row.row.correct.size == 300
    # e.g. "offset_stacked in 3 of 5 folds, dawid_skene in 1, stacked in 1"
    assert re.fullmatch(r"[a-z_+]+ in [1-5] of 5 folds(, [a-z_+]+ in [1-4])*", evaluation.chosen["auto"])
    assert "majority" not in evaluation.chosen  # a method that chooses nothing says nothing
    document = json.loads(to_json(evaluation, sources=["x"]))
    assert document["chosen"] == evaluation.chosen


def test_choice_summary_counts_the_folds() -> None:
    class Chose:
        def __init__(self, chosen: str) -> None:
            self.chosen = chosen

    fitted = [Chose("stacked"), Chose("stacked+platt"), Chose("stacked"), get_method("majority")]
    assert choice_summary(fitted) == "stacked in 2 of 3 folds, stacked+platt in 1"  # type: ignore[arg-type]
    assert choice_summary([get_method("majority")]) == ""


def test_eval_prints_what_auto_chose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    data = tmp_path / "votes.jsonl"
    data.write_text("".join(judged.model_dump_json(exclude_defaults=True) + "\n" for judged in _items(200, 1)))
    assert main(["eval", str(data), "--format", "votes", "--methods", "majority", "auto", "--bootstrap", "10"]) == 0
    out = capsys.readouterr().out
    assert "auto chose (cross-validated log-loss on each fold's training labels): " in out
