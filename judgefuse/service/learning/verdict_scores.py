"""How a refit scores a method's verdicts on their labels: Brier, accuracy, and the (confidence,
correct) pairs the threshold tuner and the paired Brier bound read.

An undecided verdict (an exact tie: no choice) counts as confidence 0.5 and wrong in every score.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgefuse.fusion.verdict import Verdict

__all__ = ["accuracy_of", "brier_of", "scored"]


def brier_of(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    total = 0.0
    for verdict, label in zip(verdicts, labels, strict=True):
        if verdict.choice is None:
            total += 0.25
        else:
            z = 1.0 if verdict.choice == label else 0.0
            total += (verdict.confidence - z) ** 2
    return total / len(labels)


def scored(verdicts: Sequence[Verdict], labels: Sequence[str]) -> tuple[list[float], list[bool]]:
    """(confidence, correct) per verdict as :func:`brier_of` scores it (undecided: 0.5, wrong)."""
    return (
        [v.confidence if v.choice is not None else 0.5 for v in verdicts],
        [v.choice is not None and v.choice == y for v, y in zip(verdicts, labels, strict=True)],
    )


def accuracy_of(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    return sum(v.choice == y for v, y in zip(verdicts, labels, strict=True)) / len(labels)
