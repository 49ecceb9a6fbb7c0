"""A stored verdict read back (``GET /v1/verdicts/{id}``, and a retried request's replay).

Judging decides and stores a verdict once; what changes afterwards is the review's: its label,
when it was labelled, and the review block (stratum, inclusion probability, whether it was
queued). So reading a verdict back is a review read: the stored decision as it was made (the
threshold it was routed with, not today's) with the review's side of it.
"""

from __future__ import annotations

from collections.abc import Mapping

from judgefuse.fusion.verdict import Verdict
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.stored_text import check_verdict_id
from judgefuse.service.kernel.verdict_out import cascade_out_of_stored, verdict_out
from judgefuse.service.schemas import CascadeOut, ReviewOut, ThresholdUsed, VerdictOut
from judgefuse.service.storage import LabelLedger, VerdictNotFound, VerdictRecord, VerdictStore

__all__ = ["VerdictReads", "review_out", "stored_cascade_out"]


class VerdictReads:
    def __init__(self, verdicts: VerdictStore, labels: LabelLedger, panels: Mapping[str, PanelRuntime]) -> None:
        self.verdicts = verdicts
        self.labels = labels
        self.panels = panels

    async def get(self, tenant: str, verdict_id: str, *, history: bool = False) -> VerdictOut:
        """The stored verdict of the caller's tenant (another tenant's, or none: 404); with
        ``history`` (``GET /v1/verdicts/{id}``) also its label history (a replay has none)."""
        check_verdict_id(tenant, verdict_id)
        record = await self.verdicts.get_verdict(tenant, verdict_id)
        if record is None:
            raise VerdictNotFound(tenant, verdict_id)
        verdict = record.verdict
        used = ThresholdUsed(
            value=verdict.threshold, version=None,
            reason="as routed when the verdict was made",
        )
        out = verdict_out(
            verdict, panel=record.panel, threshold=used, created_at=record.created_at,
            label=record.label, labelled_at=record.labelled_at,
            category=record.item.category if record.item else None,
            cascade=stored_cascade_out(verdict, self.panels.get(record.panel)),
            review=review_out(record),
        )
        if history:
            out.label_history = await self.labels.label_history(tenant, verdict_id)
        return out


def review_out(record: VerdictRecord) -> ReviewOut | None:
    """The response's ``review`` block from a record's stamp (None for older records)."""
    stamp = record.review
    if stamp is None:
        return None
    return ReviewOut.model_construct(
        queued=stamp.queued, reason=stamp.reason, stratum=stamp.stratum,
        inclusion_probability=stamp.inclusion_probability, audit_rate=stamp.audit_rate,
        threshold_version=record.threshold_version,
    )


def stored_cascade_out(verdict: Verdict, runtime: PanelRuntime | None) -> CascadeOut | None:
    """The ``cascade`` of a stored verdict, read back (the panel may since have changed or gone)."""
    cascade = runtime.cascade if runtime is not None else None
    return cascade_out_of_stored(
        verdict, fallback=cascade.fallback if cascade is not None else None,
        stages=len(cascade.all_stages()) if cascade is not None else None,
    )
