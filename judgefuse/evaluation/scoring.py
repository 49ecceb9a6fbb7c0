"""Turn votes and verdicts into the (confidence, correct) arrays every metric reads.

One rule, used for judges and fusion methods alike, so that the rows of a report are
comparable: an item where the judge or method gave no usable answer (abstained, tied, failed
to parse, or had no valid vote to fuse) counts as **not correct with confidence 0.5**. That is
JudgeBench's own rule for accuracy (a tie scores 0, and a pair is correct only when the score is
positive), and 0.5 is the confidence of a coin flip, the honest reading of "no answer".
Items the judge never saw (absent from its file) are not scored for it at all.

A fused **exact tie** (the votes favour neither answer, :func:`~judgefuse.fusion.verdict.is_tie`)
is not a failure to answer: it counts **half right**, at confidence 0.5. Correctness is a fact
per scored item (the metrics take 0/1), so half of a row's ties are scored right and half wrong
(:func:`tie_halves`: in a fixed order of their item ids, every other one right; an odd one out
wrong): the row's accuracy counts each tie as half an item, its Brier and log-loss are those of
a fair coin exactly (0.25 and log 2 per tie whichever way it is scored), and nothing depends on a
seed. (A seeded coin per item would move a voting row of a held-out set with many ties by
nearly three points between seeds.) The row counts its ties (``n_ties``); the
reports say the rule (:data:`TIE_RULE`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from judgefuse.evaluation.vote_table import ItemColumns
from judgefuse.fusion.columnar import TIE, A, FusedColumns, VoteColumns
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter

RowKind = Literal["judge", "fusion"]
NO_ANSWER_CONFIDENCE = 0.5
ANSWER_NAMES = np.asarray(["none", "A", "B", "tie"], dtype=object)
"""A row's ``choices`` indexed by the columnar answer codes (none, A, B, tie). Object, not
``<U4``: each item holds a pointer to one of these four strings, 8 bytes instead of 16, which at
10^6 items is 8 MB less per row (``eval``'s 15 rows: 120 MB); the values compare equal."""
TIE_RULE = (
    "a fused exact tie counts half right at confidence 0.5: half of a row's ties are scored right, half wrong "
    "(every other one in a fixed order of item ids, no seed); "
    "a judge's tie vote (A=B) is not correct at 0.5 (JudgeBench's rule: a tie scores 0)"
)


def tie_halves(item_ids: Sequence[str]) -> np.ndarray:
    """Which of a row's exact ties (on items ``item_ids``) are scored right: every other one in the
    order of their ids' SHA-256 digests, the first wrong, so ``len // 2`` of them are right. The
    order is fixed by the ids alone (no seed, no position), so neither answer is favoured and a
    tie is worth half an item to the row's accuracy whatever the run."""
    order = sorted(range(len(item_ids)), key=lambda k: hashlib.sha256(item_ids[k].encode()).digest())
    right = np.zeros(len(item_ids), dtype=bool)
    right[order[1::2]] = True
    return right


@dataclass(frozen=True)
class ScoredRow:
    """One judge's or method's answers on the labelled items it covered.

    Arrays share one length n: ``confidence`` (float, the confidence of the chosen answer),
    ``correct`` (bool), ``categories`` (str, "" when the source has none), ``item_index``
    (positions in the evaluated item list, for aligning two rows item by item).
    """

    name: str
    kind: RowKind
    confidence: np.ndarray
    correct: np.ndarray
    categories: np.ndarray
    item_index: np.ndarray
    n_invalid: int
    cost_usd: float = 0.0
    calls: int = 0
    n_ties: int = 0
    """Tie answers, not counted in ``n_invalid``: a method's fused exact ties (scored by
    :func:`tie_halves`), a judge's tie votes (scored not correct at 0.5)."""
    choices: np.ndarray = field(default_factory=lambda: np.asarray([], dtype=str))
    """Per item, the answer as given: ``"A"``, ``"B"``, ``"tie"`` or ``"none"`` (no usable answer)."""


def score_judge(name: str, items: Sequence[JudgedItem]) -> ScoredRow:
    """Score judge ``name`` on every labelled item it voted on (its first vote per item).

    A tie vote (``A=B``) is not correct at confidence 0.5, JudgeBench's rule (a tie scores 0); it
    is counted in ``n_ties``, not ``n_invalid``, and its answer reads ``"tie"``.
    """
    voted = [
        (position, judged, vote)
        for position, judged in enumerate(items)
        if (vote := find_vote(judged.votes, name)) is not None
    ]
    row = _score(name, "judge", ((p, judged, v.choice, v.confidence, [v]) for p, judged, v in voted))
    tied = np.asarray([vote.tie for _, judged, vote in voted if judged.item.label is not None], dtype=bool)
    choices = row.choices.copy()
    choices[tied] = "tie"
    n_ties = int(tied.sum())
    return dataclasses.replace(row, n_invalid=row.n_invalid - n_ties, n_ties=n_ties, choices=choices)


def score_verdicts(name: str, items: Sequence[JudgedItem], verdicts: Sequence[Verdict]) -> ScoredRow:
    """Score a fusion method's verdicts, one per item of ``items`` (same order); exact ties half
    right (:func:`tie_halves`)."""
    if len(items) != len(verdicts):
        raise ValueError(f"{name}: {len(verdicts)} verdicts for {len(items)} items")
    ties = [is_tie(verdict) and judged.item.label is not None for judged, verdict in zip(items, verdicts, strict=True)]
    tied = [position for position, tie in enumerate(ties) if tie]
    halves = dict(zip(tied, tie_halves([items[p].item.id for p in tied]).tolist(), strict=True))
    answers = (
        (
            position,
            judged,
            _tie_letter(judged.item.label, halves[position]) if tie else verdict.choice,
            NO_ANSWER_CONFIDENCE if tie else verdict.confidence,
            verdict.votes,
        )
        for position, (judged, verdict, tie) in enumerate(zip(items, verdicts, ties, strict=True))
    )
    row = _score(name, "fusion", answers)
    choices = row.choices.copy()
    labelled_ties = [tie for tie, judged in zip(ties, items, strict=True) if judged.item.label is not None]
    choices[np.asarray(labelled_ties, dtype=bool)] = "tie"
    return dataclasses.replace(row, n_ties=sum(ties), choices=choices)


def _tie_letter(label: Letter | None, right: bool) -> Letter:
    """The letter a tie is scored as: the label when it counts right, the other when wrong."""
    return label if right and label is not None else ("B" if label == "A" else "A")


def _score(
    name: str,
    kind: RowKind,
    answers: Iterable[tuple[int, JudgedItem, Letter | None, float | None, Sequence[JudgeVote]]],
) -> ScoredRow:
    conf: list[float] = []
    correct: list[bool] = []
    given: list[str] = []
    cats: list[str] = []
    index: list[int] = []
    invalid = 0
    cost = 0.0
    calls = 0
    for position, judged, choice, confidence, votes in answers:
        label = judged.item.label
        if label is None:
            continue
        given.append(choice if choice is not None and confidence is not None else "none")
        if choice is None or confidence is None:
            invalid += 1
            conf.append(NO_ANSWER_CONFIDENCE)
            correct.append(False)
        else:
            conf.append(confidence)
            correct.append(choice == label)
        cost += sum(vote.cost_usd for vote in votes)
        calls += sum(vote.calls for vote in votes)
        cats.append(judged.item.category or "")
        index.append(position)
    return ScoredRow(
        name=name,
        kind=kind,
        confidence=np.asarray(conf, dtype=float),
        correct=np.asarray(correct, dtype=bool),
        categories=np.asarray(cats, dtype=str),
        item_index=np.asarray(index, dtype=np.int64),
        n_invalid=invalid,
        cost_usd=cost,
        calls=calls,
        choices=np.asarray(given, dtype="<U4"),
    )


def judge_names(items: Sequence[JudgedItem]) -> list[str]:
    """Every judge that voted on any item, in order of first appearance."""
    seen: dict[str, None] = {}
    for judged in items:
        for vote in judged.votes:
            seen.setdefault(vote.judge, None)
    return list(seen)


def find_vote(votes: Sequence[JudgeVote], name: str) -> JudgeVote | None:
    """Judge ``name``'s first vote among ``votes`` (None when it did not vote)."""
    for vote in votes:
        if vote.judge == name:
            return vote
    return None


def score_columns(
    name: str, items: Sequence[JudgedItem] | ItemColumns, fused: FusedColumns, votes: VoteColumns
) -> ScoredRow:
    """:func:`score_verdicts` of verdicts given as arrays (:mod:`judgefuse.fusion.columnar`),
    one per item of ``items`` (judged items or their columns; ``votes``: those items' votes, for
    cost and calls), without building a verdict per item: the same row (tested against it), at
    array speed."""
    table = items if isinstance(items, ItemColumns) else ItemColumns.from_items(items)
    if not table.n_items == fused.answer.size == votes.n_items:
        raise ValueError(f"{name}: {fused.answer.size} verdicts for {table.n_items} items")
    keep = table.decided
    label_a = table.label_a
    tie = fused.answer == TIE
    tie_right = np.zeros(table.n_items, dtype=bool)
    tied = np.flatnonzero(tie & keep)
    tie_right[tied] = tie_halves([table.ids[p] for p in tied.tolist()])
    has_choice = fused.decided | tie
    confidence = np.where(tie, NO_ANSWER_CONFIDENCE, np.where(has_choice, fused.confidence, NO_ANSWER_CONFIDENCE))
    correct = np.where(tie, tie_right, fused.decided & ((fused.answer == A) == label_a))
    rows = table.decided_rows
    choices = ANSWER_NAMES[fused.answer[rows]]
    cost = 0.0
    for value in votes.cost_usd[rows].tolist():  # item by item, in the order score_verdicts adds
        cost += value
    return ScoredRow(
        name=name,
        kind="fusion",
        confidence=confidence[rows].astype(float),
        correct=correct[rows],
        categories=table.decided_categories,
        item_index=rows,
        n_invalid=int((~has_choice & keep).sum()),
        cost_usd=cost,
        calls=int(votes.calls[rows].sum()),
        n_ties=int((tie & keep).sum()),
        choices=choices,
    )


def score_judge_columns(name: str, items: Sequence[JudgedItem] | ItemColumns, votes: VoteColumns) -> ScoredRow:
    """:func:`score_judge` from the items' vote arrays (``votes``, one row per item of ``items``,
    judged items or their columns): the same row without a search of every item's votes per judge
    (tested against it)."""
    table = items if isinstance(items, ItemColumns) else ItemColumns.from_items(items)
    if table.n_items != votes.n_items:
        raise ValueError(f"{name}: vote arrays of {votes.n_items} items for {table.n_items} items")
    voted, slot = votes.first_vote(name)
    rows = np.flatnonzero(voted & table.decided)
    every = rows.size == table.decided_rows.size  # the judge voted on every labelled item: shared arrays
    rows = table.decided_rows if every else rows
    at = slot[rows]
    valid = votes.valid[rows, at]
    says_a = votes.says_a[rows, at]
    tied = votes.tie[rows, at]
    label_a = table.label_a[rows]
    cost = 0.0
    for value in votes.vote_cost_usd[rows, at].tolist():  # in item order, as score_judge adds
        cost += value
    choices = ANSWER_NAMES[np.where(tied, 3, np.where(valid, np.where(says_a, 1, 2), 0))]
    n_ties = int(tied.sum())
    return ScoredRow(
        name=name,
        kind="judge",
        confidence=np.where(valid, votes.confidence[rows, at], NO_ANSWER_CONFIDENCE).astype(float),
        correct=valid & (says_a == label_a),
        categories=table.decided_categories if every else table.category_names(rows),
        item_index=rows,
        n_invalid=int((~valid).sum()) - n_ties,
        cost_usd=cost,
        calls=int(votes.vote_calls[rows, at].sum()),
        n_ties=n_ties,
        choices=choices,
    )
