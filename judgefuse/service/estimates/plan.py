"""Audit labels a day for a target interval width, from a panel's stored traffic
(``GET /v1/panels/{panel}/plan``).

The computation is :func:`judgefuse.calibration.width_plan.plan_from_traffic`, the one
``judgefuse plan`` runs on an export: here its rows come from the panel's stored verdicts of the
last ``traffic_hours`` (when each was made, whether it was auto-accepted, its fused confidence,
and whether its label found it right). A label counts only where it is a sample of the
auto-accepted verdicts (an audit label, or one the request carried: ``label_stratum_key`` not
``unsolicited``); tie and both-bad labels say nothing of a letter's correctness and count in
neither. Too little traffic is an answer, not an error: ``plan`` null and ``not_enough_traffic``
saying what is missing.

Cost: one scan of the panel's stored records in the traffic window, through the report gate
(:mod:`.reports`): the records are read a page at a time on the loop, folded into four arrays
and planned in worker threads, under one of ``estimates.max_inflight_reports`` places (429
with ``Retry-After`` past ``estimates.report_wait_s``). A plan is asked for when an operator
sets an audit budget, not polled, so it is not cached.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from judgefuse.judges.types import LETTERS
from judgefuse.service.estimates.reports import Reports
from judgefuse.service.ledger import UNSOLICITED, label_stratum_key
from judgefuse.service.responses import PlanOut
from judgefuse.service.storage import RecordArchive, VerdictRecord

__all__ = ["REPORT", "traffic_plan"]

REPORT = "plan"
"""The report's name in the gate's counters (``judgefuse_report_reads_total``)."""
FOLD_RECORDS = 500
"""Records handed to the worker thread at a time: the loop holds one such hand-off, not the scan."""


@dataclass
class _Rows:
    """The scan's rows, folded a page at a time in a worker thread."""

    created_at: list[float] = field(default_factory=list)
    auto: list[bool] = field(default_factory=list)
    confidence: list[float] = field(default_factory=list)
    correct: list[float] = field(default_factory=list)

    def fold(self, records: Sequence[VerdictRecord]) -> None:
        for record in records:
            verdict = record.verdict
            auto = verdict.route == "auto_accept"
            right = math.nan
            if (
                auto
                and record.label in LETTERS
                and verdict.choice is not None
                and label_stratum_key(record) != UNSOLICITED
            ):
                right = float(record.label == verdict.choice)
            self.created_at.append(record.created_at)
            self.auto.append(auto)
            self.confidence.append(verdict.confidence)
            self.correct.append(right)

    def plan(self, panel: str, width: float, window_days: float, traffic_hours: int | None) -> PlanOut:
        from judgefuse.calibration.width_plan import NotEnoughTraffic, plan_from_traffic

        head = {
            "panel": panel,
            "width": width,
            "window_days": window_days,
            "traffic_hours": traffic_hours,
            "n_verdicts": len(self.auto),
            "n_auto": int(sum(self.auto)),
        }
        try:
            plan = plan_from_traffic(
                np.asarray(self.created_at),
                np.asarray(self.auto, dtype=bool),
                np.asarray(self.confidence),
                np.asarray(self.correct),
                width=width,
                days=window_days,
            )
        except NotEnoughTraffic as exc:
            return PlanOut.model_validate({**head, "plan": None, "not_enough_traffic": str(exc)})
        body = plan.as_dict()
        body.pop("width")
        body.pop("days")
        return PlanOut.model_validate({**head, "plan": body, "not_enough_traffic": None})


async def traffic_plan(
    storage: RecordArchive,
    reports: Reports,
    tenant: str,
    panel: str,
    *,
    width: float,
    window_days: float,
    traffic_hours: int | None,
    now: float,
) -> PlanOut:
    """The plan for ``width`` over ``window_days`` from (tenant, panel)'s verdicts of the last
    ``traffic_hours`` (None: every stored one) before ``now`` (module docstring)."""
    since = None if traffic_hours is None else now - 3600.0 * traffic_hours
    async with reports.admit(tenant, REPORT):
        rows = _Rows()
        page: list[VerdictRecord] = []
        await storage.index_existing_records()
        async for record in storage.iter_records(tenant, panel=panel, since=since):
            page.append(record)
            if len(page) >= FOLD_RECORDS:
                await reports.run(REPORT, rows.fold, page)
                page = []
        await reports.run(REPORT, rows.fold, page)
        return await reports.run(REPORT, rows.plan, panel, width, window_days, traffic_hours)
