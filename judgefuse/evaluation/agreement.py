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

from judgefuse.calibration.agreement import cohen_kappa, confusion_matrix, krippendorff_alpha_nominal
from judgefuse.evaluation.scoring import ScoredRow
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
