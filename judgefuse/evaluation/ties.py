"""How ties count: the tie-aware numbers of one judge or method (docs/offline-evaluation.md, 'Ties').

A label is ``A``, ``B``, ``tie`` or ``both_bad`` (:attr:`PairwiseItem.outcome`); an answer is
``A``, ``B``, ``tie`` (a judge's ``A=B``, or a fused exact tie) or None (no usable answer). The
main table's accuracy and every calibration metric (ECE, Brier, TH-Score, ...) are computed on the
**decided** items only (label A or B): a probability of "A is better" has no right answer on a
tie. Beside them, per row:

* ``judgebench_accuracy``: JudgeBench's rule for pairs, on decided labels. A pair scores +1 per
  game agreeing with the label, -1 per game against it, 0 for a tie or no decision, and is correct
  when its score is > 0 (the rule as the shared data's README states it; JudgeBench's labels are
  A or B only). A tie answer scores 0, so it is never correct. For a judge row this equals the
  main accuracy; a method row's main accuracy scores a fused exact tie by a seeded coin instead.
* ``decided_accuracy``: on items whose label and answer are both A or B: how often the letter is
  right when the row commits to one.
* ``three_way_accuracy``: on items labelled A, B or tie, the answer equals the label (a tie answer
  on a tie label is right; no answer is wrong). ``both_bad`` labels are left out: neither
  answer is acceptable, which is not a three-way outcome; they are counted.
* ``tie_rate``: the share of the row's answers that are ties, over every labelled item it covers.
* ``tie_precision``: how often a tie answer is right: of the row's tie answers on items labelled
  A, B or tie, the share labelled tie (None without such an answer; ``n_tie_answers_scored``
  counts them). Without tie labels it is 0 wherever the row answers a tie.
* ``tie_recall``: of the items labelled tie, the share the row answered tie (None without a tie
  label).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from judgefuse.evaluation.scoring import find_vote
from judgefuse.evaluation.vote_table import OUTCOMES, UNLABELLED, ItemColumns
from judgefuse.fusion.columnar import NONE, TIE, A, B, VoteColumns
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.judges.types import JudgedItem, Letter, Outcome, TieLabel

Label = Letter | TieLabel


@dataclass(frozen=True)
class TieReport:
    """The tie-aware counts and rates of one row (module docstring); rates are None on no items."""

    name: str
    n_decided_labels: int
    n_tie_labels: int
    n_both_bad_labels: int
    n_tie_answers: int
    judgebench_accuracy: float | None
    decided_accuracy: float | None
    n_decided_answers: int
    three_way_accuracy: float | None
    n_three_way: int
    tie_rate: float | None
    tie_precision: float | None = None
    n_tie_answers_scored: int = 0
    tie_recall: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (every field)."""
        return asdict(self)


def verdict_outcome(verdict: Verdict) -> Outcome | None:
    """A fused verdict as an answer: its letter, ``tie`` for an exact tie, None when undecided."""
    return "tie" if is_tie(verdict) else verdict.choice


def _rate(hits: int, total: int) -> float | None:
    return hits / total if total else None


def tie_report(name: str, answers: Sequence[Outcome | None], labels: Sequence[Label]) -> TieReport:
    """The tie-aware numbers of one row from its answers and the labels, item by item."""
    if len(answers) != len(labels):
        raise ValueError(f"{name}: {len(answers)} answers for {len(labels)} labels")
    return tie_report_counts(name, Counter(zip(answers, labels, strict=True)))


def tie_report_counts(name: str, counts: Mapping[tuple[Outcome | None, Label], int]) -> TieReport:
    """:func:`tie_report` from how many items have each (answer, label) pair: every number is a
    count or a ratio of counts, so a row of 10^6 items is tallied once."""

    def total(keep: Callable[[Outcome | None, Label], bool]) -> int:
        return sum(n for (answer, label), n in counts.items() if keep(answer, label))

    n_decided = total(lambda answer, label: label in ("A", "B"))
    n_committed = total(lambda answer, label: label in ("A", "B") and answer in ("A", "B"))
    n_three_way = total(lambda answer, label: label != "both_bad")
    n_tie_answers = total(lambda answer, label: answer == "tie")
    n_tie_answers_scored = total(lambda answer, label: label != "both_bad" and answer == "tie")
    n_tie_labels = total(lambda answer, label: label == "tie")
    return TieReport(
        name=name,
        n_decided_labels=n_decided,
        n_tie_labels=n_tie_labels,
        n_both_bad_labels=total(lambda answer, label: label == "both_bad"),
        n_tie_answers=n_tie_answers,
        judgebench_accuracy=_rate(total(lambda answer, label: label in ("A", "B") and answer == label), n_decided),
        decided_accuracy=_rate(
            total(lambda answer, label: label in ("A", "B") and answer in ("A", "B") and answer == label), n_committed
        ),
        n_decided_answers=n_committed,
        three_way_accuracy=_rate(total(lambda answer, label: label != "both_bad" and answer == label), n_three_way),
        n_three_way=n_three_way,
        tie_rate=_rate(n_tie_answers, sum(counts.values())),
        tie_precision=_rate(
            total(lambda answer, label: label == "tie" and answer == "tie"), n_tie_answers_scored
        ),
        n_tie_answers_scored=n_tie_answers_scored,
        tie_recall=_rate(total(lambda answer, label: label == "tie" and answer == "tie"), n_tie_labels),
    )


def tie_report_codes(name: str, answers: NDArray[np.int8], labels: NDArray[np.int8]) -> TieReport:
    """:func:`tie_report` of answers given as codes (:data:`~judgefuse.fusion.columnar.A`, ``B``,
    ``TIE``, ``NONE``) and labels as outcome codes (:data:`~judgefuse.evaluation.vote_table.OUTCOMES`)."""
    if answers.size != labels.size:
        raise ValueError(f"{name}: {answers.size} answers for {labels.size} labels")
    pairs = np.bincount(answers.astype(np.int64) * len(OUTCOMES) + labels, minlength=4 * len(OUTCOMES))
    counts = {
        (ANSWER_NAMES[code // len(OUTCOMES)], OUTCOMES[code % len(OUTCOMES)]): int(n)
        for code, n in enumerate(pairs.tolist())
        if n
    }
    return tie_report_counts(name, counts)  # type: ignore[arg-type]


ANSWER_NAMES: dict[int, Outcome | None] = {NONE: None, A: "A", B: "B", TIE: "tie"}
"""An answer code's outcome (:data:`~judgefuse.fusion.columnar.NONE` is no usable answer)."""


def judge_ties(name: str, items: Sequence[JudgedItem]) -> TieReport:
    """A judge's tie-aware numbers over ``items`` with any label (A, B, tie or both_bad): the
    judge rows of ``eval``'s and ``compare``'s ties tables. Unlabelled items are left out."""
    voted = [
        (vote, judged) for judged in items
        if judged.item.outcome is not None and (vote := find_vote(judged.votes, name)) is not None
    ]  # fmt: skip
    return tie_report(name, [vote.outcome for vote, _ in voted], [judged.item.outcome for _, judged in voted])  # type: ignore[misc]


def has_ties(reports: Sequence[TieReport]) -> bool:
    """True when a label or an answer is a tie (or a label is both_bad): the ties table is shown."""
    return any(t.n_tie_labels or t.n_both_bad_labels or t.n_tie_answers for t in reports)


def judge_ties_columns(name: str, parts: Sequence[tuple[Sequence[JudgedItem] | ItemColumns, VoteColumns]]) -> TieReport:
    """:func:`judge_ties` over the items of ``parts`` in order, each with its vote arrays: the
    judge's first vote per item by index, not by a search of every item's votes (tested against
    :func:`judge_ties` through ``evaluate``)."""
    answers: list[NDArray[np.int8]] = []
    labels: list[NDArray[np.int8]] = []
    for items, columns in parts:
        outcome = (items if isinstance(items, ItemColumns) else ItemColumns.from_items(items)).outcome
        voted, slot = columns.first_vote(name)
        rows = np.flatnonzero(voted & (outcome != UNLABELLED))
        at = slot[rows]
        code = np.where(columns.valid[rows, at], np.where(columns.says_a[rows, at], A, B), NONE)
        answers.append(np.where(columns.tie[rows, at], TIE, code).astype(np.int8))
        labels.append(outcome[rows])
    return tie_report_codes(name, np.concatenate(answers), np.concatenate(labels))
