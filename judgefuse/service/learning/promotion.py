"""The Brier part of the promotion rule: better by more than its noise (docs/design.md, 'Learning
keeps routing').

A refit candidate replaces the voting method (or the current model) only when its cross-fitted
Brier is lower than the incumbent's **by more than chance**: the one-sided 95% paired bootstrap
upper bound of the per-item Brier difference (candidate minus incumbent, same labelled items:
:func:`judgefuse.calibration.paired_difference.paired_difference`) must be below ``-MARGIN``.
This holds before any target exists as well as after, and whatever the panel's ``promote_on``
says about review load when there is no target (review load needs a target to exist).

Why: on calm traffic every method is nearly equally good, and "stacked Brier <= voting Brier"
flips with the last few labels. A promotion decided by noise swapped the serving method at
whatever moment a background refit landed, leaving a model that no stored verdict of its own
could tune a threshold for (issue 28's calm scenario: 0 of 1,500 verdicts auto-accepted after
the tune in 6 of 12 runs). Requiring a real improvement keeps the serving method stable unless
the labels say learning helps.

:func:`brier_evidence` turns the two methods' verdict confidences into the metrics the rule
reads (``brier_difference``, ``brier_difference_upper``); :func:`brier_problem` is the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgefuse.calibration.paired_difference import brier_losses, paired_difference
from judgefuse.service.storage import ModelRecord

__all__ = ["ALPHA", "MARGIN", "RETIRED", "brier_evidence", "brier_problem", "is_retired"]

RETIRED = "retired"
"""The params key of a model record that retires the learned model: no model serves, the voting
method does (:mod:`judgefuse.service.learning.routing_fallback`)."""

ALPHA = 0.05
"""One-sided level of the bootstrap interval of the Brier difference."""
MARGIN = 0.0
"""How far below 0 the upper bound must be (the interval already carries the noise)."""


def brier_evidence(
    candidate: tuple[Sequence[float], Sequence[bool]], incumbent: tuple[Sequence[float], Sequence[bool]],
) -> dict[str, float]:
    """``brier_difference`` (mean, candidate minus incumbent) and ``brier_difference_upper`` (its
    one-sided ``1 - ALPHA`` paired bootstrap bound) from each method's (confidence, correct) on
    the same labelled items, in the same order."""
    result = paired_difference(brier_losses(*candidate), brier_losses(*incumbent), alpha=ALPHA)
    return {"brier_difference": result.mean, "brier_difference_upper": result.upper}


def brier_problem(metrics: dict[str, float], *, voting: str) -> str | None:
    """Why the candidate's Brier does not justify a promotion (None: it does). Reads
    ``stacked_brier``, ``baseline_brier`` and, when present, ``brier_difference_upper`` (without
    it only the point difference is known, and it must be below ``-MARGIN``)."""
    stacked, baseline = metrics["stacked_brier"], metrics["baseline_brier"]
    upper = metrics.get("brier_difference_upper", stacked - baseline)
    if stacked - baseline < -MARGIN and upper < -MARGIN:
        return None
    if stacked > baseline:
        return f"cross-fitted stacked Brier {stacked:.4f} is worse than {voting}'s {baseline:.4f}"
    return (
        f"cross-fitted stacked Brier {stacked:.4f} vs {voting}'s {baseline:.4f} is not better by "
        f"more than its noise (paired bootstrap {100 * (1 - ALPHA):.0f}% upper bound of the "
        f"difference {upper:+.4f}, must be below {-MARGIN:+g})"
    )


def is_retired(record: ModelRecord | None) -> bool:
    """Whether ``record`` retires the panel's learned model (no model serves)."""
    return record is not None and bool(record.params.get(RETIRED))
