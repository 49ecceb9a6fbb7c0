"""Routing a verdict with the latest threshold of its (tenant, panel) (docs/design.md, 'Routing and threshold tuning').

``auto_accept`` iff the threshold applies to the verdict and ``confidence >= threshold``. A
threshold applies when it was tuned for the verdict's method (and, for a learned method, the
same model version); a "review everything" record, no record, or an undecided verdict send it
to ``human_review``. The returned :class:`ThresholdUsed` always says why, in words (``reason``)
and as one word (``code``: the review queue's ``reason``).
"""

from __future__ import annotations

from typing import Any

from judgefuse.fusion.verdict import Verdict
from judgefuse.service.schemas import ThresholdUsed
from judgefuse.service.storage import ThresholdRecord

__all__ = ["route_verdict"]


def route_verdict(
    verdict: Verdict, record: ThresholdRecord | None, *, panel: str
) -> tuple[str, ThresholdUsed]:
    """(route, the threshold used and why). Pure."""
    if record is None:
        return "human_review", ThresholdUsed(
            value=None, version=None, code="no_threshold",
            reason=f"no threshold tuned for panel {panel!r} (POST /v1/thresholds/tune): "
                   "every verdict goes to human review",
        )
    used: dict[str, Any] = {"value": record.threshold, "version": record.version, "method": record.method}
    if record.details.get("review_everything"):
        return "human_review", ThresholdUsed(
            **{**used, "value": None}, code="review_everything",
            reason=f"threshold version {record.version} says review everything: "
                   f"{record.details.get('reason', 'no threshold met the target')}",
        )
    if record.method != verdict.method:
        return "human_review", ThresholdUsed(
            **used, code="method_mismatch",
            reason=f"threshold version {record.version} was tuned for method "
                           f"{record.method!r}, this verdict is {verdict.method!r}: retune",
        )
    wanted_version = record.details.get("model_version")
    if wanted_version and wanted_version != verdict.model_version:
        return "human_review", ThresholdUsed(
            **used, code="model_mismatch",
            reason=f"threshold version {record.version} was tuned for model "
                           f"{wanted_version}, this verdict is {verdict.model_version}: retune",
        )
    if verdict.choice is None:
        return "human_review", ThresholdUsed(**used, code="undecided", reason="undecided verdict")
    if verdict.confidence >= record.threshold:
        return "auto_accept", ThresholdUsed(
            **used, code="above_threshold", reason=f"confidence {verdict.confidence:.4f} >= threshold {record.threshold:.4f}"
        )
    return "human_review", ThresholdUsed(
        **used, code="below_threshold", reason=f"confidence {verdict.confidence:.4f} < threshold {record.threshold:.4f}"
    )
