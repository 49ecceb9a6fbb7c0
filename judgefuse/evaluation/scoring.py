"""Turn votes and verdicts into the (confidence, correct) arrays every metric reads.

One rule, used for judges and fusion methods alike, so that the rows of a report are
comparable: an item where the judge or method gave no usable answer (abstained, tied, failed
to parse, or had no valid vote to fuse) counts as **not correct with confidence 0.5**. That is
JudgeBench's own rule for accuracy (a tie scores 0, and a pair is correct only when the score is
positive), and 0.5 is the confidence of a coin flip, the honest reading of "no answer".
Items the judge never saw (absent from its file) are not scored for it at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgedItem, JudgeVote, Letter

RowKind = Literal["judge", "fusion"]
NO_ANSWER_CONFIDENCE = 0.5


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


def score_judge(name: str, items: Sequence[JudgedItem]) -> ScoredRow:
    """Score judge ``name`` on every labelled item it voted on (its first vote per item)."""
    answers = (
        (position, judged, vote.choice, vote.confidence, [vote])
        for position, judged in enumerate(items)
        if (vote := _find_vote(judged.votes, name)) is not None
    )
    return _score(name, "judge", answers)


def score_verdicts(name: str, items: Sequence[JudgedItem], verdicts: Sequence[Verdict]) -> ScoredRow:
    """Score a fusion method's verdicts, one per item of ``items`` (same order)."""
    if len(items) != len(verdicts):
        raise ValueError(f"{name}: {len(verdicts)} verdicts for {len(items)} items")
    answers = (
        (position, judged, verdict.choice, verdict.confidence, verdict.votes)
        for position, (judged, verdict) in enumerate(zip(items, verdicts, strict=True))
    )
    return _score(name, "fusion", answers)


def _score(
    name: str,
    kind: RowKind,
    answers: Iterable[tuple[int, JudgedItem, Letter | None, float | None, Sequence[JudgeVote]]],
) -> ScoredRow:
    conf: list[float] = []
    correct: list[bool] = []
    cats: list[str] = []
    index: list[int] = []
    invalid = 0
    cost = 0.0
    calls = 0
    for position, judged, choice, confidence, votes in answers:
        label = judged.item.label
        if label is None:
            continue
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
    )


def judge_names(items: Sequence[JudgedItem]) -> list[str]:
    """Every judge that voted on any item, in order of first appearance."""
    seen: dict[str, None] = {}
    for judged in items:
        for vote in judged.votes:
            seen.setdefault(vote.judge, None)
    return list(seen)


def _find_vote(votes: Sequence[JudgeVote], name: str) -> JudgeVote | None:
    for vote in votes:
        if vote.judge == name:
            return vote
    return None
