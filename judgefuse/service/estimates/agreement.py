"""Agreement of a judge or a method with the labels, read from its agreement counter.

The ledger counts what each judge and method answered on every A/B label
(:func:`judgefuse.service.ledger.agreement_field`: ``A``, ``B``, ``tie`` or ``none`` against
``A`` or ``B``); this module turns one read of those fields (all time or over the window) into
``GET /v1/calibration``'s ``agreement`` block: the 2x2 confusion matrix of the A/B answers,
Cohen's kappa over them (:func:`judgefuse.calibration.agreement.cohen_kappa`, the function the
offline ``eval`` uses), and beside them the tie votes and the missing answers per label.

Kappa here is over the A/B answers on A/B labels: a tie vote or no answer is counted beside it,
not as a disagreement (the offline report reads them as answers of their own). The labels are
those of the review loop (review, audit, inline and unsolicited labels), not a uniform sample
of the traffic: the population estimates are the ``population`` block's job.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from judgefuse.calibration.agreement import cohen_kappa
from judgefuse.judges.types import LETTERS
from judgefuse.service.ledger import agreement_field

__all__ = ["agreement_block", "tie_count"]



def _count(fields: Mapping[str, Any], answer: str, label: str) -> int:
    return int(fields.get(agreement_field(answer, label), 0))


def tie_count(fields: Mapping[str, Any]) -> int:
    """Tie votes (or fused ties) on A/B labels in one read of an agreement counter."""
    return sum(_count(fields, "tie", label) for label in LETTERS)


def agreement_block(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Confusion, Cohen's kappa, ties and missing answers of one read of an agreement counter."""
    counts = [[_count(fields, answer, label) for answer in LETTERS] for label in LETTERS]
    labels: list[str] = []
    answers: list[str] = []
    for i, label in enumerate(LETTERS):
        for j, answer in enumerate(LETTERS):
            labels += [label] * counts[i][j]
            answers += [answer] * counts[i][j]
    return {
        "n": len(labels),
        "cohen_kappa": cohen_kappa(labels, answers),
        "confusion": {"labels": list(LETTERS), "answers": list(LETTERS), "counts": counts},
        "ties": {label: _count(fields, "tie", label) for label in LETTERS},
        "no_answer": {label: _count(fields, "none", label) for label in LETTERS},
    }
