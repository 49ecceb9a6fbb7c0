"""Agreement with the labels, the way people ask for it: per judge and per method, Cohen's kappa
against the labels, the confusion matrix (ties and no-answers as their own columns), and the
items where the row and the label disagree most confidently; and, for the panel, Krippendorff's
alpha over the judges' answers (nominal; a judge's invalid vote is a missing rating).

The numerics are in :mod:`judgefuse.calibration.agreement`. Kappa reads each row's answers as
given (``A``, ``B``, ``tie``, ``none``) against the label, so an abstention or a tie counts as a
disagreement, unlike the accuracy's coin for ties: kappa says how often the row *says* what the
label says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from judgefuse.calibration.agreement import (
    cohen_kappa,
    cohen_kappa_counts,
    confusion_matrix,
    krippendorff_alpha_counts,
    krippendorff_alpha_nominal,
)
from judgefuse.evaluation.scoring import ScoredRow
from judgefuse.evaluation.vote_table import LABEL_B, ItemColumns
from judgefuse.fusion.columnar import VoteColumns
from judgefuse.judges.types import JudgedItem

ANSWERS = ("A", "B", "tie", "none")
"""The confusion matrix's columns (what a row answered)."""
LABELS = ("A", "B")
"""The confusion matrix's rows (what the label says)."""
N_DISAGREEMENTS = 5


@dataclass(frozen=True)
class Disagreement:
    item_id: str
    answer: str
    label: str
    confidence: float


@dataclass(frozen=True)
class RowAgreement:
    """One judge's or method's agreement with the labels over the items it answered."""

    name: str
    n: int
    kappa: float | None
    confusion: list[list[int]]
    """``confusion[i][j]``: items labelled :data:`LABELS` ``[i]`` answered :data:`ANSWERS` ``[j]``."""
    disagreements: list[Disagreement] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "cohen_kappa": self.kappa,
            "confusion": {"labels": list(LABELS), "answers": list(ANSWERS), "counts": self.confusion},
            "most_confident_disagreements": [d.__dict__ for d in self.disagreements],
        }


def row_agreement(row: ScoredRow, items: Sequence[JudgedItem], *, top: int = N_DISAGREEMENTS) -> RowAgreement:
    """Kappa, confusion and the ``top`` most confident disagreements of ``row`` over ``items``
    (the labelled items the row was scored on; ``row.item_index`` points into them)."""
    labels = [str(items[i].item.label) for i in row.item_index]
    answers = [str(a) for a in row.choices]
    order = np.argsort(-row.confidence, kind="stable")
    disagreements = [
        Disagreement(items[row.item_index[k]].item.id, answers[k], labels[k], float(row.confidence[k]))
        for k in order
        if answers[k] in LABELS and answers[k] != labels[k]
    ][:top]
    return RowAgreement(
        name=row.name,
        n=len(labels),
        kappa=cohen_kappa(labels, answers),
        confusion=confusion_matrix(labels, answers, ANSWERS)[: len(LABELS)],
        disagreements=disagreements,
    )


def row_agreement_columns(row: ScoredRow, items: ItemColumns, *, top: int = N_DISAGREEMENTS) -> RowAgreement:
    """:func:`row_agreement` with the labels and ids from the items' columns: kappa and the
    confusion matrix from counts of (label, answer) pairs (the same integer sums), the most
    confident disagreements by one stable sort."""
    label_b = items.outcome[row.item_index] == LABEL_B
    labels = np.asarray(["A", "B"], dtype="<U4")[label_b.astype(np.int64)]
    answers = np.asarray(row.choices, dtype="<U4")
    said = {answer: answers == answer for answer in ANSWERS}  # one string comparison per answer
    pairs: dict[tuple[str, str], int] = {}
    for label, mine in zip(LABELS, (~label_b, label_b), strict=True):
        for answer in ANSWERS:
            count = int((mine & said[answer]).sum())
            if count:
                pairs[(label, answer)] = count
    confusion = [[pairs.get((label, answer), 0) for answer in ANSWERS] for label in LABELS]
    wrong = np.flatnonzero((said["A"] & label_b) | (said["B"] & ~label_b))
    order = wrong[np.argsort(-row.confidence[wrong], kind="stable")][:top]
    disagreements = [
        Disagreement(items.ids[int(row.item_index[k])], str(answers[k]), str(labels[k]), float(row.confidence[k]))
        for k in order.tolist()
    ]
    return RowAgreement(row.name, int(labels.size), cohen_kappa_counts(pairs), confusion, disagreements)


def panel_alpha_columns(votes: VoteColumns, judges: Sequence[str]) -> float | None:
    """:func:`panel_alpha` from the items' vote arrays: per item, how many of ``judges`` gave A
    and how many B as their first vote (an invalid or tie first vote is a missing rating)."""
    counts = np.zeros((votes.n_items, 2), dtype=np.int64)
    for name in judges if votes.present.shape[1] else ():
        voted, slot = votes.first_vote(name)
        rows = np.arange(votes.n_items)
        letter = voted & votes.valid[rows, slot]
        says_a = votes.says_a[rows, slot]
        counts[:, 0] += letter & says_a
        counts[:, 1] += letter & ~says_a
    return krippendorff_alpha_counts(counts, ("A", "B"))


def panel_alpha(items: Sequence[JudgedItem], judges: Sequence[str]) -> float | None:
    """Krippendorff's alpha (nominal) among ``judges`` over ``items``: how far the panel agrees
    with itself (their first vote per item; an invalid or absent vote is a missing rating)."""
    units = []
    for judged in items:
        first: dict[str, str | None] = {}
        for vote in judged.votes:
            first.setdefault(vote.judge, vote.choice)
        units.append([first.get(judge) for judge in judges])
    return krippendorff_alpha_nominal(units)


def agreement_dict(rows: Sequence[RowAgreement], alpha: float | None) -> dict[str, Any]:
    """The JSON report's ``agreement`` block."""
    return {
        "judges_krippendorff_alpha": alpha,
        "rows": {row.name: row.as_dict() for row in rows},
        "note": "kappa and the confusion matrix read each answer as given (A, B, tie, none) against the label",
    }
