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


def test_with_tie_labels_auto_is_cross_fitted_on_them_and_answers_ties() -> None:
    rng = np.random.default_rng(5)
    items = []
    for i in range(400):
        truth = "tie" if rng.random() < 0.2 else ("A" if rng.random() < 0.5 else "B")
        votes = []
        for k, accuracy in enumerate((0.6, 0.65, 0.7, 0.75)):
            if rng.random() < (0.5 if truth == "tie" else 0.05):
                votes.append(JudgeVote(judge=f"j{k}", mode="sc", tie=True))
                continue
            right = truth != "tie" and rng.random() < accuracy
            choice = truth if right else ("A" if truth == "B" else "B" if truth == "A" else rng.choice(["A", "B"]))
            votes.append(JudgeVote(judge=f"j{k}", mode="sc", choice=str(choice), confidence=0.8))  # type: ignore[arg-type]
        item = PairwiseItem(id=f"i{i}", question="q", answer_a="a", answer_b="b", label=truth)  # type: ignore[arg-type]
        items.append(JudgedItem(item=item, votes=votes))
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "auto"), n_bootstrap=10))
    ties = {t.name: t for t in evaluation.ties}
    assert ties["auto"].n_tie_answers > 20 and ties["auto"].tie_precision is not None
    assert ties["auto"].tie_precision > 0.4  # tie labels are 23% of the items
    assert ties["auto"].three_way_accuracy is not None and ties["majority"].three_way_accuracy is not None
    assert ties["auto"].three_way_accuracy > ties["majority"].three_way_accuracy + 0.05
    assert evaluation.row("auto").row.correct.size == ties["auto"].n_decided_labels
