"""Turn votes and verdicts into the (confidence, correct) arrays every metric reads.

One rule, used for judges and fusion methods alike, so that the rows of a report are
comparable: an item where the judge or method gave no usable answer (abstained, tied, failed
to parse, or had no valid vote to fuse) counts as **not correct with confidence 0.5**. That is
JudgeBench's own rule for accuracy (a tie scores 0, and a pair is correct only when the score is
positive), and 0.5 is the confidence of a coin flip, the honest reading of "no answer".
Items the judge never saw (absent from its file) are not scored for it at all.

A fused **exact tie** (the votes favour neither answer, :func:`~judgefuse.fusion.verdict.is_tie`)
is not a failure to answer: it is scored by a seeded coin (:func:`tie_coin`, from the seed and
the item id, so neither position is favoured and a rerun gives the same numbers) at confidence
0.5, which is half right in expectation. The row counts its ties (``n_ties``); the reports say
the rule (:data:`TIE_RULE`).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from judgefuse.fusion.columnar import TIE, A, B, FusedColumns, VoteColumns
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter

RowKind = Literal["judge", "fusion"]
NO_ANSWER_CONFIDENCE = 0.5
TIE_RULE = (
    "a fused exact tie is scored by a seeded coin (per item id) at confidence 0.5: half right in expectation; "
    "a judge's tie vote (A=B) is not correct at 0.5 (JudgeBench's rule: a tie scores 0)"
)


def tie_coin(item_id: str, seed: int) -> Letter:
    """The letter a tie on ``item_id`` is scored as: a fair coin, fixed by the seed and the id."""
    return "A" if hashlib.sha256(f"{seed}:{item_id}".encode()).digest()[0] & 1 == 0 else "B"


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
    :func:`tie_coin`), a judge's tie votes (scored not correct at 0.5)."""
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


def score_verdicts(
    name: str, items: Sequence[JudgedItem], verdicts: Sequence[Verdict], *, tie_seed: int = 0
) -> ScoredRow:
    """Score a fusion method's verdicts, one per item of ``items`` (same order); exact ties by
    :func:`tie_coin` with ``tie_seed``."""
    if len(items) != len(verdicts):
        raise ValueError(f"{name}: {len(verdicts)} verdicts for {len(items)} items")
    ties = [is_tie(verdict) and judged.item.label is not None for judged, verdict in zip(items, verdicts, strict=True)]
    answers = (
        (
            position,
            judged,
            tie_coin(judged.item.id, tie_seed) if tie else verdict.choice,
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
    name: str, items: Sequence[JudgedItem], fused: FusedColumns, votes: VoteColumns, *, tie_seed: int = 0
) -> ScoredRow:
    """:func:`score_verdicts` of verdicts given as arrays (:mod:`judgefuse.fusion.columnar`),
    one per item of ``items`` (``votes``: those items' votes, for cost and calls), without
    building a verdict per item: the same row (tested against it), at array speed."""
    if not len(items) == fused.answer.size == votes.n_items:
        raise ValueError(f"{name}: {fused.answer.size} verdicts for {len(items)} items")
    labels = [judged.item.label for judged in items]
    keep = np.asarray([label is not None for label in labels], dtype=bool)
    label_a = np.asarray([label == "A" for label in labels], dtype=bool)
    tie = fused.answer == TIE
    coin_a = np.zeros(len(items), dtype=bool)
    for position in np.flatnonzero(tie & keep).tolist():
        coin_a[position] = tie_coin(items[position].item.id, tie_seed) == "A"
    says_a = np.where(tie, coin_a, fused.answer == A)
    has_choice = fused.decided | tie
    confidence = np.where(tie, NO_ANSWER_CONFIDENCE, np.where(has_choice, fused.confidence, NO_ANSWER_CONFIDENCE))
    correct = has_choice & (says_a == label_a)
    choices = np.where(tie, "tie", np.where(fused.answer == A, "A", np.where(fused.answer == B, "B", "none")))
    cost = 0.0
    for value in votes.cost_usd[keep].tolist():  # item by item, in the order score_verdicts adds
        cost += value
    calls = int(votes.calls[keep].sum())
    categories = [judged.item.category or "" for judged, kept in zip(items, keep.tolist(), strict=True) if kept]
    return ScoredRow(
        name=name,
        kind="fusion",
        confidence=confidence[keep].astype(float),
        correct=correct[keep],
        categories=np.asarray(categories, dtype=str),
        item_index=np.flatnonzero(keep).astype(np.int64),
        n_invalid=int((~has_choice & keep).sum()),
        cost_usd=cost,
        calls=calls,
        n_ties=int((tie & keep).sum()),
        choices=np.asarray(choices[keep], dtype="<U4"),
    )


def score_judge_columns(name: str, items: Sequence[JudgedItem], votes: VoteColumns) -> ScoredRow:
    """:func:`score_judge` from the items' vote arrays (``votes``, one row per item of ``items``):
    the same row without a search of every item's votes per judge (tested against it)."""
    if len(items) != votes.n_items:
        raise ValueError(f"{name}: vote arrays of {votes.n_items} items for {len(items)} items")
    voted, slot = votes.first_vote(name)
    keep = voted & np.asarray([judged.item.label is not None for judged in items], dtype=bool)
    rows = np.flatnonzero(keep)
    at = slot[rows]
    valid = votes.valid[rows, at]
    says_a = votes.says_a[rows, at]
    tied = votes.tie[rows, at]
    label_a = np.asarray([items[i].item.label == "A" for i in rows.tolist()], dtype=bool)
    cost = 0.0
    for value in votes.vote_cost_usd[rows, at].tolist():  # in item order, as score_judge adds
        cost += value
    choices = np.where(tied, "tie", np.where(valid, np.where(says_a, "A", "B"), "none"))
    n_ties = int(tied.sum())
    return ScoredRow(
        name=name,
        kind="judge",
        confidence=np.where(valid, votes.confidence[rows, at], NO_ANSWER_CONFIDENCE).astype(float),
        correct=valid & (says_a == label_a),
        categories=np.asarray([items[i].item.category or "" for i in rows.tolist()], dtype=str),
        item_index=rows.astype(np.int64),
        n_invalid=int((~valid).sum()) - n_ties,
        cost_usd=cost,
        calls=int(votes.vote_calls[rows, at].sum()),
        n_ties=n_ties,
        choices=np.asarray(choices, dtype="<U4"),
    )
