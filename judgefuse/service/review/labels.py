"""The label path: one label of one stored verdict, whoever gives it (``POST /v1/feedback``, the
review page, or a request's inline label on ``/v1/judge`` and ``/v1/fuse``).

Storage applies a label in one atomic step: the record, the accumulator increments of the
ledger (:func:`judgefuse.service.ledger.label_increments`; a relabel subtracts the old label's),
and the end of any review lease on the verdict. What a first label sets off afterwards happens
here: the label counter, the refit scheduler's count (learning decides when enough labels came
in; review is handed its ``note_label`` rather than importing learning), and, for an audit
label, the precision monitor of the threshold version that routed the verdict.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import cast

from judgefuse.judges.types import Letter
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.stored_text import check_verdict_id
from judgefuse.service.ledger import label_increments
from judgefuse.service.monitoring.monitor import Monitors
from judgefuse.service.schemas import LabelResult
from judgefuse.service.storage import (
    DECIDED,
    LabelKind,
    LabelOutcome,
    Storage,
    StorageError,
    VerdictRecord,
)

__all__ = ["LabelService", "label_result"]

log = logging.getLogger("judgefuse.service")


class LabelService:
    def __init__(
        self,
        storage: Storage,
        metrics: ServiceMetrics,
        panels: Mapping[str, PanelRuntime],
        monitors: Monitors,
        note_label: Callable[[str, str], None],
    ) -> None:
        self.storage = storage
        self.metrics = metrics
        self.panels = panels
        self.monitors = monitors
        self.note_label = note_label
        """Called with (tenant, panel) after each first label (the refit scheduler's count)."""

    async def feedback(
        self, tenant: str, verdict_id: str, label: LabelKind, comment: str | None = None, *,
        by: str | None = None,
    ) -> LabelResult:
        """Label a verdict (idempotent: labelled / relabelled / unchanged)."""
        check_verdict_id(tenant, verdict_id)
        return label_result(await self.label(tenant, verdict_id, label, comment, by=by))

    async def label(
        self, tenant: str, verdict_id: str, label: LabelKind, comment: str | None = None, *,
        by: str | None = "inline",
    ) -> LabelOutcome:
        """Store the label (the verdict id already checked) and count it; the outcome says
        whether it was new, a relabel or the same label again. ``by`` names who gave it in the
        verdict's label history (default ``inline``: a label carried by a judging request).

        Only a verdict's first ``A``/``B`` label is news to learning and monitoring: the refit
        scheduler counts it and an audit verdict's precision monitor is fed it (its
        ``decided_at`` is this label's time). A ``tie`` or ``both_bad`` label is counted under
        its kind and nothing else; relabels and undos never feed a monitor again (a sequential
        test cannot take an observation back)."""
        outcome = await self.storage.set_label(tenant, verdict_id, label, label_increments,
                                               comment=comment, by=by)
        record = outcome.record
        self.metrics.child(self.metrics.labels, tenant, record.panel, outcome.status).inc()
        if label in DECIDED and outcome.status != "unchanged" and record.decided_at == record.labelled_at:
            self.note_label(tenant, record.panel)
            await self._monitor_label(tenant, record, cast(Letter, label))
        return outcome

    async def undo(
        self, tenant: str, verdict_id: str, *, labelled_at: float, annotator: str, lease_s: float
    ) -> VerdictRecord | None:
        """Take back the label set at ``labelled_at`` (the review page's undo): storage removes
        it and its increments in one step (the accumulators equal a recount without it) and
        returns a queued item to the queue leased to ``annotator``. None when the label is no
        longer that one (relabelled or undone already)."""
        check_verdict_id(tenant, verdict_id)
        record = await self.storage.undo_label(
            tenant, verdict_id, label_increments, labelled_at=labelled_at, annotator=annotator,
            lease_s=lease_s)
        if record is not None:
            self.metrics.child(self.metrics.labels, tenant, record.panel, "undone").inc()
        return record

    async def _monitor_label(self, tenant: str, record: VerdictRecord, label: Letter) -> None:
        """A first decided label of an audit verdict feeds its threshold version's precision
        monitor (relabels never do: see :mod:`judgefuse.service.monitoring.monitor`). The label
        is stored already, so a storage failure here is logged, not raised: the monitor is
        rebuilt from the stored audit labels in the background and so still counts it."""
        stamp = record.review
        if stamp is None or stamp.stratum != "audit" or record.threshold_version is None:
            return
        runtime = self.panels.get(record.panel)
        on_drift = runtime.panel.config.on_drift if runtime else "review_everything"
        try:
            threshold = await self.storage.get_threshold(tenant, record.panel,
                                                          version=record.threshold_version)
        except StorageError as exc:  # on_label never ran, so nothing has asked for a rebuild
            log.error("monitor %s/%s: label not fed (a rebuild will count it): %s", tenant, record.panel,
                      type(exc).__name__)
            self.monitors.rebuild_soon(tenant, record.panel, record.threshold_version, on_drift=on_drift)
            return
        try:
            await self.monitors.on_label(tenant, record, label, threshold, on_drift=on_drift)
        except StorageError as exc:  # on_label has asked for the rebuild
            log.error("monitor %s/%s: label not fed (a rebuild will count it): %s", tenant, record.panel,
                      type(exc).__name__)


def label_result(outcome: LabelOutcome) -> LabelResult:
    """The answer to a label (``POST /v1/feedback``, or ``feedback`` on a verdict labelled inline)."""
    return LabelResult(
        verdict_id=outcome.record.id, status=outcome.status, label=outcome.label,
        previous=outcome.previous, comment=outcome.record.label_comment,
        labelled_at=outcome.record.labelled_at,
        keys_updated=sorted(outcome.applied),
    )
