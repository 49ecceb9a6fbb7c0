"""Report rows do not depend on item order or on which answer is called A.

Checked on the real JudgeBench replay for every judge and every rule-based fusion method
(learned methods are excluded: their cross-fitting folds are drawn from the item order and the
labels, so a permutation legitimately changes which model scores which item).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import Evaluation, EvaluationOptions, evaluate
from judgefuse.judges.types import JudgedItem, JudgeVote, other

RULE_METHODS = ("majority", "confidence_weighted", "sqrt_confidence_weighted", "entropy_weighted", "mean_probability")
METRICS = ("accuracy", "ece", "adaptive_ce", "mce", "brier", "nll", "th_score", "macroce", "auroc")


def _swap_vote(vote: JudgeVote) -> JudgeVote:
    return vote.model_copy(
        update={
            "choice": None if vote.choice is None else other(vote.choice),
            "p_a": None if vote.p_a is None else 1.0 - vote.p_a,
            "samples": [None if s is None else other(s) for s in vote.samples],
        }
    )


def _swap(judged: JudgedItem) -> JudgedItem:
    item = judged.item
    swapped = item.model_copy(
        update={
            "answer_a": item.answer_b,
            "answer_b": item.answer_a,
            "label": None if item.label is None else other(item.label),
        }
    )
    return JudgedItem(item=swapped, votes=[_swap_vote(vote) for vote in judged.votes])


def _rows(evaluation: Evaluation) -> dict[str, dict[str, float]]:
    return {report.row.name: report.metrics for report in evaluation.rows}


@pytest.fixture(scope="module")
def items(shared_data: Path) -> list[JudgedItem]:
    return load(shared_data / "judgebench")


@pytest.fixture(scope="module")
def baseline(items: list[JudgedItem]) -> dict[str, dict[str, float]]:
    return _rows(evaluate(items, options=EvaluationOptions(methods=RULE_METHODS, n_bootstrap=10)))


def _assert_same(left: dict[str, dict[str, float]], right: dict[str, dict[str, float]]) -> None:
    assert left.keys() == right.keys()
    for name in left:
        for metric in METRICS:
            assert right[name][metric] == pytest.approx(left[name][metric], abs=1e-9, nan_ok=True), (name, metric)


def test_permuting_items_changes_no_row(items: list[JudgedItem], baseline: dict[str, dict[str, float]]) -> None:
    shuffled = list(items)
    random.Random(7).shuffle(shuffled)
    _assert_same(baseline, _rows(evaluate(shuffled, options=EvaluationOptions(methods=RULE_METHODS, n_bootstrap=10))))


def test_swapping_a_and_b_everywhere_changes_no_row(
    items: list[JudgedItem], baseline: dict[str, dict[str, float]]
) -> None:
    swapped = [_swap(judged) for judged in items]
    assert sum(j.item.label == "A" for j in swapped) == sum(j.item.label == "B" for j in items)
    _assert_same(baseline, _rows(evaluate(swapped, options=EvaluationOptions(methods=RULE_METHODS, n_bootstrap=10))))
