"""Per-judge accuracy without labels and the panel's effective size, from stored verdicts
(the ``panel_structure`` block of ``GET /v1/calibration``).

The numbers are :func:`judgefuse.fusion.panel_structure.panel_structure`'s (the same code as
``judgefuse eval``'s panel table), computed on the panel's newest ``window`` verdicts (labelled
or not: Dawid-Skene and the label-free effective size read every one) together with its newest
``window`` labelled verdicts (the labelled accuracy and labelled effective size read those).
Cascade verdicts are left out: they hold only the votes of the stages they reached. Dawid-Skene
is refitted on this sample (in a worker thread, with the sorting before it), so the estimates
describe the traffic in the window whether or not the panel serves a Dawid-Skene model.

That refit and the reads behind it cost 80-200 ms at a few thousand stored verdicts (measured by
``benchmarks/bench_gateway.py --labels``), twenty times the rest of ``GET /v1/calibration``, so
:class:`PanelEstimatesCache` keeps each panel's answer for ``panel_structure_ttl_s`` seconds: a
dashboard polling every few seconds pays it once per interval, and the estimates, which move
with thousands of verdicts, not single ones, are at most that old. (A time, not the data
version of :mod:`.reports`: on a panel in traffic that version moves with every verdict.) A
recomputation takes a place of the report gate (:mod:`.reports`); a reused answer takes none.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from judgefuse.fusion.panel_structure import JudgeEstimate, PanelStructure, panel_structure
from judgefuse.judges.types import Letter
from judgefuse.service.storage import LabelLedger, VerdictRecord, VerdictStore

if TYPE_CHECKING:
    from judgefuse.service.estimates.reports import Reports

__all__ = ["PanelEstimatesCache", "panel_estimates"]

REPORT = "panel_structure"
"""The report's name in the gate's counters (:mod:`.reports`)."""


async def panel_estimates(
    verdicts: VerdictStore, labels: LabelLedger, tenant: str, panel: str, *, window: int,
    judges: Sequence[str] = (), reports: Reports | None = None,
) -> PanelStructure | None:
    """The panel structure of (tenant, panel)'s stored verdicts (module docstring); None when
    there are fewer than two judges or no valid vote (or the backend cannot list recent ones
    and nothing is labelled). Every name in ``judges`` (the panel's) is listed, one without a
    vote in the sample with ``n_votes`` 0 and no estimates. ``verdicts`` lists the recent
    records, ``labels`` the labelled ones (usually one storage, passed twice)."""
    try:
        recent = await verdicts.iter_recent(tenant, panel, limit=window)
    except NotImplementedError:
        recent = []
    labelled = await labels.iter_labelled(tenant, panel, limit=window)
    if reports is None:
        return await asyncio.to_thread(_structure, labelled, recent, judges)
    return await reports.run(REPORT, _structure, labelled, recent, judges)


def _structure(
    labelled: Sequence[VerdictRecord], recent: Sequence[VerdictRecord], judges: Sequence[str],
) -> PanelStructure | None:
    """:func:`panel_estimates` of the records read (a worker thread: the fit and the sort are
    the costly part)."""
    records: dict[str, VerdictRecord] = {}
    for record in [*labelled, *recent]:  # a labelled record listed twice is the same record
        if record.verdict.method != "cascade":
            records.setdefault(record.id, record)
    if not records:
        return None
    ordered = sorted(records.values(), key=lambda r: (r.created_at, r.id))
    batches = [list(r.verdict.votes) for r in ordered]
    # a tie or both-bad label (on a recent record) is no preference: unlabelled for the fit
    labels: list[Letter | None] = [r.label if r.label == "A" or r.label == "B" else None
                                   for r in ordered]
    structure = panel_structure(batches, labels)
    if structure is None:
        return None
    seen = {e.judge for e in structure.judges}
    silent = [JudgeEstimate(judge=name, n_votes=0, labelled_accuracy=None, estimated_accuracy=None)
              for name in judges if name not in seen]
    return replace(structure, judges=[*structure.judges, *silent]) if silent else structure


class PanelEstimatesCache:
    """:func:`panel_estimates` per (tenant, panel, window, judges), reused for ``ttl_s`` seconds
    of the caller's clock (module docstring); ``ttl_s`` 0 recomputes on every call. Concurrent
    misses of one key share one computation."""

    def __init__(self, ttl_s: float, reports: Reports | None = None) -> None:
        self.ttl_s = ttl_s
        self.reports = reports
        """The report gate a recomputation is admitted by (None: no gate)."""
        self._entries: dict[tuple[object, ...], tuple[float, asyncio.Task[PanelStructure | None]]] = {}

    async def get(
        self, verdicts: VerdictStore, labels: LabelLedger, tenant: str, panel: str, *, window: int,
        judges: Sequence[str], now: float,
    ) -> PanelStructure | None:
        key = (tenant, panel, window, tuple(judges))
        entry = self._entries.get(key)
        if entry is None or now - entry[0] >= self.ttl_s or (entry[1].done() and entry[1].exception()):
            task = asyncio.ensure_future(self._compute(verdicts, labels, tenant, panel, window=window,
                                                      judges=judges))
            entry = self._entries[key] = (now, task)
        elif self.reports is not None:
            self.reports.count(tenant, REPORT, "cached")
        return await asyncio.shield(entry[1])

    async def _compute(
        self, verdicts: VerdictStore, labels: LabelLedger, tenant: str, panel: str, *, window: int,
        judges: Sequence[str],
    ) -> PanelStructure | None:
        if self.reports is None:
            return await panel_estimates(verdicts, labels, tenant, panel, window=window, judges=judges)
        async with self.reports.admit(tenant, REPORT):
            return await panel_estimates(verdicts, labels, tenant, panel, window=window, judges=judges,
                                         reports=self.reports)
