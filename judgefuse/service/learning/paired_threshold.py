"""The threshold a refit candidate is promoted with (docs/design.md, 'Learning keeps routing').

A promoted model serves only together with a threshold tuned for it, at the target of the
panel's latest tuned threshold: :func:`tune_at_target` tunes it on the same labels from the
candidate's **cross-fitted** confidences (no label scores a model that saw it), on the
population the labels stand for (:class:`Population`) as ``POST /v1/thresholds/tune`` does;
:func:`review_load` is what that threshold sends to review, the number the promotion rule
compares (:mod:`judgefuse.service.learning.promotion`); :func:`paired_threshold` is the record
stored with the model, naming its version, so it routes that model's verdicts only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from judgefuse.calibration import ThresholdReport
from judgefuse.calibration.stratified_tuning import tune_threshold_stratified
from judgefuse.fusion.verdict import Verdict
from judgefuse.service.learning.promotion import PromotionTarget
from judgefuse.service.learning.verdict_scores import scored
from judgefuse.service.ledger import solicited
from judgefuse.service.storage import ThresholdRecord

__all__ = ["Population", "paired_threshold", "review_load", "tune_at_target"]


@dataclass(frozen=True)
class Population:
    """Who the labels stand for, as ``POST /v1/thresholds/tune`` weighs them: each label's review
    stratum key (``review``, ``auto@{rate}``, ``unsolicited``) and N_s, the panel's verdicts per
    stratum (traffic counters). Unsolicited labels are fitted on but never tune a threshold."""

    strata: Sequence[str]
    counts: dict[str, int]


def tune_at_target(
    verdicts: Sequence[Verdict],
    labels: Sequence[str],
    target: PromotionTarget,
    population: Population | None,
) -> ThresholdReport:
    """The threshold tuned for these (cross-fitted or re-fused) verdicts on their labels, on the
    population (``tune_threshold_stratified``; one stratum of every label without ``population``,
    where it is exactly ``tune_threshold``)."""
    confidence, correct = scored(verdicts, labels)
    if population is None:
        strata: Sequence[str] = ["all"] * len(labels)
        counts = {"all": len(labels)}
    else:
        strata, counts = population.strata, population.counts
    keep, kept, counts = solicited(strata, counts)
    return tune_threshold_stratified(
        [confidence[i] for i in keep],
        [correct[i] for i in keep],
        kept,
        counts,
        target_precision=target.target_precision,
        delta=target.delta,
        min_count=target.min_count,
    )


def review_load(report: ThresholdReport) -> float:
    """Share sent to review at the target: everything when no threshold qualifies."""
    return 1.0 if report.threshold is None else 1.0 - report.coverage


def paired_threshold(
    panel: str,
    report: ThresholdReport,
    target: PromotionTarget,
    model_version: str | None,
    n_labels: int,
    created_at: float,
    learned: str,
) -> ThresholdRecord:
    """The candidate's threshold as a threshold record naming its model (so it applies only to
    that model's verdicts), stored with the model in one step (``Storage.put_serving``)."""
    assert report.threshold is not None
    return ThresholdRecord(
        panel=panel,
        threshold=report.threshold,
        created_at=created_at,
        method=learned,
        target_precision=target.target_precision,
        delta=target.delta,
        coverage=report.coverage,
        n_labels=report.n,
        details={
            "report": report.as_dict(),
            "model_version": model_version,
            "paired": True,
            "data": f"cross-fitted confidences of {learned} model {model_version} on {n_labels} labels"
            " (weighted by review stratum)",
        },
    )
