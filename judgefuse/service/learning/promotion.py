"""The promotion rule: when a refit candidate may replace what serves (docs/design.md, 'Learning
keeps routing').

:func:`promotion_problems` weighs the candidate's cross-fitted metrics against the voting
method's on the same labels, per the panel's ``promote_on``: ``both`` (default) needs the
candidate's Brier below the voting Brier by more than its noise AND a review load at the target
no higher than the voting method's; ``brier`` or ``review_load`` weigh one. Without a target
(:class:`PromotionTarget`: nothing was ever tuned for the panel) the Brier rule applies whatever
``promote_on`` says, since review load needs a target to exist. With a target, a candidate for
which no threshold qualifies is never promoted (it could only send everything to review): the
current model and threshold keep serving.

The Brier part: the candidate's cross-fitted Brier must be lower than the incumbent's **by more
than chance**: the one-sided 95% paired bootstrap upper bound of the per-item Brier difference
(candidate minus incumbent, same labelled items:
:func:`judgefuse.calibration.paired_difference.paired_difference`) must be below ``-MARGIN``.
This holds before any target exists as well as after.

Why: on calm traffic every method is nearly equally good, and "stacked Brier <= voting Brier"
flips with the last few labels. A promotion decided by noise swaps the serving method at
whatever moment a background refit lands, leaving a model that no stored verdict of its own
can tune a threshold for (on ``benchmarks/bench_calm_tune.py``'s calm traffic a point-difference
rule left 0 of 1,500 verdicts auto-accepted after the tune in 6 of 12 runs). Requiring a real
improvement keeps the serving method stable unless the labels say learning helps.

:func:`brier_evidence` turns the two methods' verdict confidences into the metrics the rule
reads (``brier_difference``, ``brier_difference_upper``); :func:`brier_problem` is the Brier part.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from judgefuse.calibration import ThresholdReport
from judgefuse.calibration.paired_difference import brier_losses, paired_difference
from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = [
    "ALPHA",
    "MARGIN",
    "RETIRED",
    "PromoteOn",
    "PromotionTarget",
    "brier_evidence",
    "brier_problem",
    "is_retired",
    "promotion_problems",
]

RETIRED = "retired"
"""The params key of a model record that retires the learned model: no model serves, the voting
method does (:mod:`judgefuse.service.learning.routing_fallback`)."""

ALPHA = 0.05
"""One-sided level of the bootstrap interval of the Brier difference."""
MARGIN = 0.0
"""How far below 0 the upper bound must be (the interval already carries the noise)."""

PromoteOn = Literal["both", "brier", "review_load"]


@dataclass(frozen=True)
class PromotionTarget:
    """What a promoted model's threshold must guarantee (from the panel's latest tuned one)."""

    target_precision: float
    delta: float
    min_count: int = 30

    @classmethod
    def of(cls, record: ThresholdRecord | None) -> PromotionTarget | None:
        """The target of a tuned threshold record; None when there is none to keep."""
        if record is None or record.target_precision is None or record.delta is None:
            return None
        report = record.details.get("report") or {}
        min_count = report.get("min_count") if isinstance(report, dict) else None
        return cls(
            record.target_precision,
            record.delta,
            int(min_count) if isinstance(min_count, int) and min_count >= 1 else 30,
        )

    def __str__(self) -> str:
        return f"precision {self.target_precision:g} at delta {self.delta:g}"


def promotion_problems(
    metrics: dict[str, float],
    candidate: ThresholdReport | None,
    *,
    voting: str,
    target: PromotionTarget | None,
    promote_on: PromoteOn,
    learned: str = "candidate",
) -> list[str]:
    """Why a candidate must not be promoted (empty: promote). Pure: the rule of the module
    docstring over the cross-fitted ``metrics`` (Brier and, with a target, review loads) and
    the candidate's tuned threshold report. ``learned`` names the candidate's method in the
    reasons (the metrics keep their ``stacked_`` names whatever the method)."""
    problems: list[str] = []
    if target is not None:
        if candidate is None or candidate.threshold is None:
            reason = candidate.reason if candidate is not None else "not tuned"
            problems.append(
                f"no threshold of the candidate meets precision {target.target_precision:g} "
                f"at delta {target.delta:g} ({reason}): the current model and threshold keep serving"
            )
        elif promote_on in ("both", "review_load") and (
            metrics["stacked_review_load"] > metrics["baseline_review_load"]
        ):
            problems.append(
                f"{learned}'s review load at the target {metrics['stacked_review_load']:.3f} is higher than "
                f"{voting}'s {metrics['baseline_review_load']:.3f}"
            )
    if promote_on in ("both", "brier") or target is None:
        # better by more than its noise, before a target exists as well as after
        brier = brier_problem(metrics, voting=voting, learned=learned)
        if brier is not None:
            problems.append(brier)
    return problems


def brier_evidence(
    candidate: tuple[Sequence[float], Sequence[bool]],
    incumbent: tuple[Sequence[float], Sequence[bool]],
) -> dict[str, float]:
    """``brier_difference`` (mean, candidate minus incumbent) and ``brier_difference_upper`` (its
    one-sided ``1 - ALPHA`` paired bootstrap bound) from each method's (confidence, correct) on
    the same labelled items, in the same order."""
    result = paired_difference(brier_losses(*candidate), brier_losses(*incumbent), alpha=ALPHA)
    return {"brier_difference": result.mean, "brier_difference_upper": result.upper}


def brier_problem(metrics: dict[str, float], *, voting: str, learned: str = "candidate") -> str | None:
    """Why the candidate's Brier does not justify a promotion (None: it does). Reads
    ``stacked_brier`` (the candidate's, whatever its method: ``learned`` names it in the reason),
    ``baseline_brier`` and, when present, ``brier_difference_upper`` (without it only the point
    difference is known, and it must be below ``-MARGIN``)."""
    stacked, baseline = metrics["stacked_brier"], metrics["baseline_brier"]
    upper = metrics.get("brier_difference_upper", stacked - baseline)
    if stacked - baseline < -MARGIN and upper < -MARGIN:
        return None
    if stacked > baseline:
        return f"cross-fitted {learned} Brier {stacked:.4f} is worse than {voting}'s {baseline:.4f}"
    return (
        f"cross-fitted {learned} Brier {stacked:.4f} vs {voting}'s {baseline:.4f} is not better by "
        f"more than its noise (paired bootstrap {100 * (1 - ALPHA):.0f}% upper bound of the "
        f"difference {upper:+.4f}, must be below {-MARGIN:+g})"
    )


def is_retired(record: ModelRecord | None) -> bool:
    """Whether ``record`` retires the panel's learned model (no model serves)."""
    return record is not None and bool(record.params.get(RETIRED))
