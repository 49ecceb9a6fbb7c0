"""The estimates slice's service: what the labels and votes say about calibration, for
``GET /v1/calibration``, the dashboard and the ``/metrics`` gauges.

All of it is a read of what judging and review wrote (the ledger's accumulators and traffic
counters, stored votes): the labelled sample's metrics and the population estimates
(:mod:`judgefuse.service.estimates.calibration_store`), each method's history per day, and the
panel structure (:mod:`judgefuse.service.estimates.panel_estimates`), cached per panel for
``panel_structure_ttl_s`` because it refits Dawid-Skene on the newest votes.

The reads of stored verdicts (win rate, audit plan, disagreement list, panel structure) each go through
:attr:`CalibrationService.reports` (:mod:`.reports`): off the event loop, a few at once, and
not repeated while the panel's data has not changed.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from judgefuse.service.estimates.calibration_store import (
    calibration_history,
    calibration_report,
    metrics_json,
)
from judgefuse.service.estimates.disagreements import DisagreementCache
from judgefuse.service.estimates.panel_estimates import PanelEstimatesCache
from judgefuse.service.estimates.plan import traffic_plan
from judgefuse.service.estimates.reports import Reports
from judgefuse.service.estimates.win_rates import WinRateCache, WinRateOut
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.ledger import label_kind_counts, parse_key
from judgefuse.service.responses import PlanOut
from judgefuse.service.settings import Settings
from judgefuse.service.storage import Storage, hour_of

__all__ = ["CalibrationService"]


class CalibrationService:
    def __init__(
        self, settings: Settings, storage: Storage, *, clock: Callable[[], float] = time.time,
        metrics: ServiceMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.clock = clock
        self.reports = Reports(settings.estimates.max_inflight_reports, settings.estimates.report_wait_s,
                               polls_per_s=settings.estimates.report_polls_per_s, metrics=metrics)
        """The gate, worker hand-off and counters of every read of stored verdicts (:mod:`.reports`;
        the console's lists take their places here too)."""
        self.panel_structure = PanelEstimatesCache(settings.estimates.panel_structure_ttl_s, self.reports)
        """The panel structure, per panel, for ``panel_structure_ttl_s``."""
        self.disagreement_lists = DisagreementCache(clock=clock, reports=self.reports)
        """The disagreement list, per panel, until a label changes (:mod:`.disagreements`)."""
        self.win_rates = WinRateCache(self.reports, clock=clock)
        """The win rate's scans, per panel and field, until a verdict or label lands (:mod:`.win_rates`)."""

    async def report(
        self, tenant: str, panel: str, *, window_hours: int | None, n_bins: int, eps: float,
        population: bool = True,
    ) -> list[dict[str, Any]]:
        """One entry per calibration key of (tenant, panel): the labelled sample all time and
        over the last ``window_hours`` (None: no window), and the population block."""
        return await calibration_report(
            self.storage, tenant, panel, window_hours=window_hours, n_bins=n_bins, eps=eps,
            now=self.clock(), population=population,
        )

    async def win_rate(
        self, tenant: str, panel: str, *, field: str, x: str, y: str, window_hours: int | None,
        level: float,
    ) -> WinRateOut:
        """The win rate of X over Y among (tenant, panel)'s stored verdicts of the last
        ``window_hours`` (None: all), corrected by the labels (:mod:`.win_rates`)."""
        return await self.win_rates.get(self.storage, self.storage, tenant, panel, field=field, x=x,
                                        y=y, window_hours=window_hours, level=level)

    async def win_rate_json(
        self, tenant: str, panel: str, *, field: str, x: str, y: str, window_hours: int | None,
        level: float,
    ) -> bytes:
        """:meth:`win_rate` as its JSON body (memoised with the answer: a repeated poll encodes nothing)."""
        found = await self.win_rates.get_json(self.storage, self.storage, tenant, panel, field=field,
                                              x=x, y=y, window_hours=window_hours, level=level)
        return found[1]

    async def plan(
        self, tenant: str, panel: str, *, width: float, window_days: float, traffic_hours: int | None
    ) -> PlanOut:
        """Audit labels a day for a ``width``-wide 95% interval over ``window_days``, uniform and
        by confidence band, from (tenant, panel)'s stored verdicts of the last ``traffic_hours``
        (None: all): one scan through the report gate (:mod:`.plan`)."""
        return await traffic_plan(self.storage, self.reports, tenant, panel, width=width,
                                  window_days=window_days, traffic_hours=traffic_hours, now=self.clock())

    async def label_kinds(
        self, tenant: str, panel: str, *, window_hours: int | None
    ) -> dict[str, dict[str, int | None]]:
        """Per kind (``tie``, ``both_bad``): labels all time and over the window (None: no
        window). They are counted here because no calibration key holds them."""
        total = await label_kind_counts(self.storage, tenant, panel)
        window = (await label_kind_counts(self.storage, tenant, panel,
                                          since_hour=hour_of(self.clock()) - window_hours + 1)
                  if window_hours else None)
        return {kind: {"all_time": n, "window": window[kind] if window else None}
                for kind, n in total.items()}

    async def disagreements(
        self, tenant: str, panel: str, *, window_hours: int | None, limit: int
    ) -> dict[str, Any]:
        """The labelled verdicts whose fused answer (A or B) the A/B label contradicts, most
        confident first: at most ``limit`` of the newest ``DISAGREEMENT_SCAN`` labelled
        verdicts of the window (None: all time). These are the items a reviewer should read
        first: a confident miss says more about a panel than its accuracy. Labels come from the
        review loop, so this lists labelled verdicts, not a sample of the population. The
        verdicts are read again only after a label changed (:mod:`.disagreements`)."""
        since = None if not window_hours else self.clock() - 3600.0 * window_hours
        return await self.disagreement_lists.get(self.storage, tenant, panel, since=since, limit=limit)

    async def history(
        self, tenant: str, storage_key: str, *, days: int, n_bins: int, eps: float
    ) -> list[dict[str, Any]]:
        """ECE and TH-Score of one key per day over the last ``days`` days, oldest first."""
        return await calibration_history(
            self.storage, tenant, storage_key, days=days, now=self.clock(), n_bins=n_bins, eps=eps,
        )

    async def structure(self, tenant: str, runtime: PanelRuntime) -> dict[str, Any] | None:
        """The panel structure of (tenant, panel) as JSON (None before any votes to read)."""
        found = await self.panel_structure.get(
            self.storage, self.storage, tenant, runtime.name, window=self.settings.estimates.panel_structure_window,
            judges=[j.name for j in runtime.panel.config.judges], now=self.clock(),
        )
        return found.to_json() if found is not None else None

    async def gauges(self, tenant: str) -> AsyncIterator[tuple[str, str, dict[str, Any]]]:
        """(panel, ``kind:name:mode``, metrics) of every calibration key of the tenant, all
        time, at the configured bins and eps: one at a time, so a storage failure halfway
        leaves the gauges already read refreshed."""
        settings = self.settings
        for raw in await self.storage.list_accumulators(tenant):
            try:
                key = parse_key(raw)
            except ValueError:
                continue
            if key.kind in ("abstain", "agreement", "traffic"):
                continue
            fields = await self.storage.read_accumulator(tenant, raw)
            values = metrics_json(fields, n_bins=settings.estimates.calibration_bins, eps=settings.estimates.th_eps)
            yield key.panel, f"{key.kind}:{key.name}:{key.mode}", values
