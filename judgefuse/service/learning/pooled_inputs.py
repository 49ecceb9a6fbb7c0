"""When the tuner may pool labels by inclusion probability, and the inputs it then gets.

docs/design.md, 'Tuning and monitoring on the population': a label's inclusion probability is
known from its stamp and its route, and within one routing (a threshold ``t``, or none) it is
constant on each side of ``t``: 1 below (review), the audit rate above. Pooled over periods,
the labels a candidate ``tau >= t`` accepts are then one Clopper-Pearson sample
(:func:`~judgefuse.calibration.pooled_tuning.tune_threshold_pooled`). That holds only when the
confidence tuned is the one that was compared with ``t``, so every label must say how it was
routed:

* reviewed whatever its confidence (``no_threshold``, ``review_everything``, a threshold of
  another method or model, ``undecided``): constant inclusion, no threshold (NaN);
* ``below_threshold`` or ``audit``: routed by its own ``Verdict.threshold``, which counts only
  when the tuned method (and model version) made the verdict, and its confidence is on the side
  of ``t`` its route says;
* anything else (a drift alarm's route, an inline label, a record from before the stamps, a
  verdict of another method routed by a threshold, a panel whose ``on_drift`` raises the
  threshold, which routes at a value the verdict does not store): the tune falls back to the
  stratified bound, whose strata need no support.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from judgefuse.service.learning.tuning_data import Routing

if TYPE_CHECKING:
    from judgefuse.calibration.thresholds import ThresholdReport

__all__ = ["PooledInputs", "pooled_inputs", "stratified_coverage", "tune_pooled"]

WHATEVER_THE_CONFIDENCE = frozenset(
    {"no_threshold", "review_everything", "method_mismatch", "model_mismatch", "undecided"})
"""Route reasons that queue a verdict for review whatever its confidence."""
BY_THRESHOLD = frozenset({"below_threshold", "audit"})
"""Route reasons whose inclusion probability depends on the side of the threshold."""


@dataclass(frozen=True)
class PooledInputs:
    """The labels for :func:`~judgefuse.calibration.pooled_tuning.tune_threshold_pooled`."""

    confidences: list[float]
    correct: list[bool]
    routed_at: list[float]
    """Each label's routing threshold, NaN when its inclusion did not depend on the confidence."""


def pooled_inputs(confidences: Sequence[float], correct: Sequence[bool],
                  routing: Sequence[Routing], *, on_drift: str) -> PooledInputs | str:
    """The pooled tuner's inputs, or why it may not pool (see the module docstring)."""
    if on_drift == "raise_threshold":
        return "the panel's on_drift raises the threshold, which verdicts do not store"
    routed_at: list[float] = []
    for c, how in zip(confidences, routing, strict=True):
        if how.inclusion is None or how.reason is None:
            return "a label has no review stamp"
        if how.reason in WHATEVER_THE_CONFIDENCE:
            routed_at.append(math.nan)
        elif how.reason in BY_THRESHOLD:
            if not how.by_tuned_method or how.threshold is None:
                return "a label was routed by another method's confidence"
            if (c >= how.threshold) != (how.reason == "audit"):
                return "a label's confidence is on the other side of the threshold that routed it"
            routed_at.append(how.threshold)
        else:
            return f"a label was queued for {how.reason!r}"
    return PooledInputs(list(confidences), list(correct), routed_at)


def stratified_coverage(confidences: Sequence[float], strata: Sequence[str],
                        population: Mapping[str, int], tau: float) -> float:
    """Share of traffic a threshold ``tau`` accepts, estimated per stratum: ``sum_s N_s A_s/n_s / N``.

    The pooled tuner knows no unlabelled confidences; each stratum's labels are a random sample
    of its verdicts, so this is the stratified tuner's own coverage estimate.
    """
    total = sum(population.values())
    if total <= 0:
        return 0.0
    labelled: dict[str, int] = {}
    accepted: dict[str, int] = {}
    for c, s in zip(confidences, strata, strict=True):
        labelled[s] = labelled.get(s, 0) + 1
        accepted[s] = accepted.get(s, 0) + (c >= tau)
    return sum(population.get(s, 0) * accepted[s] / n for s, n in labelled.items()) / total


def tune_pooled(inputs: PooledInputs, strata: Sequence[str], population: Mapping[str, int], *,
                target_precision: float, delta: float, min_count: int) -> ThresholdReport:
    """The pooled tune (``mixed="drop"``: one Clopper-Pearson sample per candidate), with the
    coverage, review load and expected errors estimated per stratum (:func:`stratified_coverage`)."""
    from judgefuse.calibration.pooled_tuning import tune_threshold_pooled

    report = tune_threshold_pooled(inputs.confidences, inputs.correct, inputs.routed_at,
                                   target_precision=target_precision, delta=delta,
                                   min_count=min_count)
    if report.threshold is None:
        return report
    coverage = stratified_coverage(inputs.confidences, strata, population, report.threshold)
    accepted = coverage * sum(population.values())
    return dataclasses.replace(report, coverage=coverage, review_load=1.0 - coverage,
                               expected_errors=accepted * (1.0 - report.precision))
