"""Panel structure: label-free judge accuracy and the effective number of independent judges."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.evaluation.panel_structure import effective_number, panel_structure
from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def _items(n: int, accuracies: dict[str, float], *, shared_errors: bool, seed: int) -> list[JudgedItem]:
    rng = np.random.default_rng(seed)
    items = []
    for i in range(n):
        truth = "A" if rng.random() < 0.5 else "B"
        common = rng.random()  # one draw for every judge: their errors coincide
        votes = []
        for judge, acc in accuracies.items():
            right = (common if shared_errors else rng.random()) < acc
            choice = truth if right else ("B" if truth == "A" else "A")
            votes.append(JudgeVote(judge=judge, mode="sc", choice=choice, confidence=0.8))
        items.append(JudgedItem(item=PairwiseItem(id=f"i{i}", label=truth), votes=votes))
    return items


def test_independent_judges_count_fully_and_accuracy_is_recovered() -> None:
    accs = {"j1": 0.85, "j2": 0.75, "j3": 0.7, "j4": 0.65}
    structure = panel_structure(_items(3000, accs, shared_errors=False, seed=0))
    assert structure is not None
    print(f"k_eff independent: {structure.effective_judges_labelled:.2f} (target ~4)")
    assert structure.effective_judges_labelled == pytest.approx(4.0, abs=0.3)
    for estimate in structure.judges:
        assert estimate.estimated_accuracy == pytest.approx(accs[estimate.judge], abs=0.03)
        assert estimate.labelled_accuracy == pytest.approx(accs[estimate.judge], abs=0.03)


def test_judges_that_err_together_are_worth_about_one() -> None:
    structure = panel_structure(_items(2000, {f"j{k}": 0.7 for k in range(6)}, shared_errors=True, seed=1))
    assert structure is not None
    print(f"k_eff identical errors: {structure.effective_judges_labelled:.2f} (target ~1)")
    assert structure.effective_judges_labelled == pytest.approx(1.0, abs=0.05)


def test_effective_number_needs_shared_items() -> None:
    errors = np.full((5, 2), np.nan)
    assert effective_number(errors) == (None, None)


def test_eval_runs_dawid_skene_label_free_and_it_beats_majority_here() -> None:
    items = _items(600, {"good": 0.9, "w1": 0.6, "w2": 0.6}, shared_errors=False, seed=2)
    evaluation = evaluate(items, options=EvaluationOptions(methods=("majority", "dawid_skene"), n_bootstrap=20))
    ds, maj = evaluation.row("dawid_skene").metrics["accuracy"], evaluation.row("majority").metrics["accuracy"]
    print(f"dawid_skene {ds:.3f} vs majority {maj:.3f}")
    assert ds > maj + 0.03
