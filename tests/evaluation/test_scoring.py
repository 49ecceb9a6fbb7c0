"""The one scoring rule every report row follows (judges and fusion methods alike)."""

from __future__ import annotations

import pytest

from judgefuse.evaluation.runner import EvaluationOptions, evaluate
from judgefuse.evaluation.scoring import (
    NO_ANSWER_CONFIDENCE,
    judge_names,
    score_judge,
    score_verdicts,
)
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgedItem, JudgeVote, PairwiseItem


def _item(item_id: str, label: str | None, votes: list[JudgeVote], category: str | None = None) -> JudgedItem:
    return JudgedItem(item=PairwiseItem(id=item_id, label=label, category=category), votes=votes)


def _vote(judge: str, choice: str, confidence: float) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=confidence)


def _items() -> list[JudgedItem]:
    return [
        # j1 right at 0.8; j2 abstained (invalid: counts wrong at 0.5)
        _item("i1", "A", [_vote("j1", "A", 0.8), JudgeVote.invalid("j2", "sc", "tie")]),
        # j1 right at 0.6; j2 never voted here: not scored for j2
        _item("i2", "B", [_vote("j1", "B", 0.6)]),
        # j1 wrong at 0.9; j2 right at 0.7
        _item("i3", "A", [_vote("j1", "B", 0.9), _vote("j2", "A", 0.7)]),
        # unlabelled: excluded from every row
        _item("i4", None, [_vote("j1", "A", 0.95), _vote("j2", "B", 0.55), _vote("j3", "A", 0.6)]),
    ]


def _labelled() -> list[JudgedItem]:
    return [judged for judged in _items() if judged.item.label is not None]


def test_invalid_vote_counts_wrong_at_one_half() -> None:
    row = score_judge("j2", _labelled())
    assert row.kind == "judge"
    assert row.correct.tolist() == [False, True]
    assert row.confidence.tolist() == [0.5, 0.7]
    assert NO_ANSWER_CONFIDENCE == 0.5
    assert row.n_invalid == 1
    assert row.item_index.tolist() == [0, 2]  # i2 (position 1) is absent for j2


def test_unvoted_items_are_not_scored() -> None:
    row_1, row_2 = score_judge("j1", _labelled()), score_judge("j2", _labelled())
    assert row_1.correct.size == 3 and row_2.correct.size == 2
    assert row_1.correct.tolist() == [True, True, False]
    assert row_1.confidence.tolist() == [0.8, 0.6, 0.9]
    assert row_1.n_invalid == 0


def test_unlabelled_items_are_excluded() -> None:
    # score_judge given the unlabelled item too: it must skip it
    row = score_judge("j1", _items())
    assert row.correct.size == 3
    assert 0.95 not in row.confidence.tolist()
    # j3 voted only on the unlabelled item: no judge row at all in an evaluation
    evaluation = evaluate(_items(), options=EvaluationOptions(methods=("majority",), n_bootstrap=10))
    assert evaluation.n_items == 4 and evaluation.n_labelled == 3
    names = [report.row.name for report in evaluation.rows]
    assert names == ["j1", "j2", "majority"]
    assert evaluation.row("j1").row.correct.size == 3
    assert evaluation.row("j2").row.correct.size == 2
    assert evaluation.row("j2").metrics["accuracy"] == pytest.approx(0.5)
    assert evaluation.row("majority").row.correct.size == 3
    assert "j3" in judge_names(_items())


def test_verdicts_scored_with_the_same_rule() -> None:
    items = _labelled()
    verdicts = [
        Verdict(choice="A", confidence=0.9, p_a=0.9, method="m"),
        Verdict(choice=None, confidence=0.5, p_a=0.5, method="m"),  # undecided: wrong at 0.5
        Verdict(choice="B", confidence=0.6, p_a=0.4, method="m"),
    ]
    row = score_verdicts("m", items, verdicts)
    assert row.kind == "fusion"
    assert row.correct.tolist() == [True, False, False]
    assert row.confidence.tolist() == [0.9, 0.5, 0.6]
    assert row.n_invalid == 1
    assert row.item_index.tolist() == [0, 1, 2]


def test_verdict_count_mismatch_raises() -> None:
    items = _labelled()
    with pytest.raises(ValueError, match="2 verdicts for 3 items"):
        score_verdicts("m", items, [Verdict(choice="A", confidence=0.9, p_a=0.9, method="m")] * 2)


def test_first_vote_of_a_judge_is_the_one_scored() -> None:
    items = [_item("i1", "A", [_vote("j1", "A", 0.7), _vote("j1", "B", 0.99)])]
    row = score_judge("j1", items)
    assert row.correct.tolist() == [True] and row.confidence.tolist() == [0.7]


def test_categories_kept_per_item() -> None:
    items = [
        _item("i1", "A", [_vote("j1", "A", 0.8)], category="math"),
        _item("i2", "B", [_vote("j1", "A", 0.6)], category="code"),
        _item("i3", "B", [_vote("j1", "B", 0.7)]),
    ]
    row = score_judge("j1", items)
    assert row.categories.tolist() == ["math", "code", ""]
