"""One panel's overview: what the console's first page shows, read from the store.

Each number comes from the same function the API answers with, for the same window, so the page
and the API cannot disagree (tests/service/console/test_console_numbers.py checks it):

* auto-accept precision with its interval: the population block of the active method's key in
  ``GET /v1/calibration`` (window ``window_hours``), with its ``model_assisted`` estimate beside it;
* the review queue: ``GET /v1/review/stats``;
* the monitor: ``GET /v1/monitor``'s snapshot of the current threshold version;
* routing per hour and latency and cost per judge: :mod:`.figures` (traffic counters and the
  newest stored votes);
* learning: the refit log (``GET /v1/fusion/refits``), each refit's outcome and reason;
* the threshold's certificate margin (lower bound minus target, from the tune's report stored
  with the threshold, as ``GET /v1/thresholds`` answers it) beside how often simulated
  certificates of that margin missed (:data:`judgefuse.calibration.thresholds.MARGIN_MISSES`).

Every card names its source on the page, and a figure that has no evidence yet (no audit label
behind the monitor, no verdict in the window, no loop-lag sample) says "no evidence yet" rather
than a green "ok" or a bare dash.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from judgefuse.service.console.figures import judge_figures, routing
from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.learning.service import LearningService
from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.review.queue import ReviewQueue
from judgefuse.service.settings import Settings
from judgefuse.service.storage import LabelLedger, ThresholdRecord, VerdictStore
from judgefuse.service.storage.verdict_query import VerdictQuery

__all__ = ["ConsoleSources", "panel_overview"]

WINDOW_HOURS = 24
"""The window of the routing rates and population estimates the overview shows."""
REFITS_SHOWN = 5
"""Refits listed per panel (the API has up to 50)."""
JUDGE_SAMPLE = 500
"""Newest stored verdicts whose votes give each judge's latency and cost."""
AGE_SCAN = 1000
"""Records read, oldest first, per queued stratum to find the oldest item still waiting."""


async def oldest_waiting(storage: VerdictStore, tenant: str, panel: str) -> tuple[float | None, bool]:
    """(``created_at`` of the oldest unlabelled verdict of a queued stratum, whether the search
    was complete): the age of the review queue. Read oldest first through
    ``Storage.list_verdicts``; when the oldest ``AGE_SCAN`` of a stratum are all labelled the
    answer is "older than the first one found" and ``complete`` is False."""
    found: list[float] = []
    complete = True
    for stratum in ("review", "audit"):
        page = await storage.list_verdicts(
            tenant, VerdictQuery(panel=panel, stratum=stratum, labelled=False, oldest_first=True),
            limit=1, scan_limit=AGE_SCAN)
        if page.records:
            found.append(page.records[0].created_at)
        elif page.next is not None:
            complete = False
    return (min(found) if found else None), complete


def age_text(seconds: float) -> str:
    """A queue age for people: minutes, hours and minutes, or days and hours."""
    minutes = int(max(seconds, 0) // 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


class ConsoleSources(Protocol):
    """What the console reads besides the slices' services (the gateway provides it)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def panels(self) -> Mapping[str, PanelRuntime]: ...

    def clock(self) -> float: ...

    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None: ...

    async def active_method(self, tenant: str, runtime: PanelRuntime) -> tuple[str, str | None]: ...


def certificate(threshold: ThresholdRecord | None) -> dict[str, Any] | None:
    """The certified threshold's margin (lower bound minus target) and lower bound, from the
    tune's report stored with it, with the simulated miss count of certificates of that margin;
    None without a certificate (no threshold, review everything, a record stored without a report)."""
    from judgefuse.calibration.thresholds import margin_misses

    if threshold is None or threshold.details.get("review_everything"):
        return None
    report = threshold.details.get("report")
    if not isinstance(report, Mapping):
        return None
    lower, target, margin = report.get("lower_bound"), report.get("target"), report.get("margin")
    if margin is None and isinstance(lower, int | float) and isinstance(target, int | float):
        margin = lower - target  # a report from before the margin was stored
    if not isinstance(margin, int | float) or not isinstance(lower, int | float):
        return None
    band = margin_misses(float(margin))
    return {"margin": float(margin), "lower_bound": float(lower), "thin": margin < 0.01,
            "misses": None if band is None else band.describe()}


def _next_step(threshold: ThresholdRecord | None, labelled: int) -> str | None:
    """What an operator should do next, when the panel is not yet routing on its own."""
    if threshold is None:
        if labelled == 0:
            return ("No threshold tuned: everything goes to review. Label some verdicts in the "
                    "review queue (/review), then tune one (POST /v1/thresholds/tune or "
                    "`judgefuse tune`).")
        return ("No threshold tuned: everything goes to review. There are labels: tune one "
                "(POST /v1/thresholds/tune or `judgefuse tune`).")
    if threshold.details.get("review_everything"):
        return ("The tuned threshold reviews everything (no candidate met the target with the "
                "labels so far): label more verdicts (/review), then tune again.")
    return None


async def panel_overview(
    tenant: str, runtime: PanelRuntime, sources: ConsoleSources, *,
    calibration: CalibrationService, queue: ReviewQueue, monitoring: MonitorService,
    learning: LearningService, verdicts: VerdictStore, labels: LabelLedger,
) -> dict[str, Any]:
    """Everything the overview shows for one (tenant, panel), as plain data for the template;
    the stored verdicts read from ``verdicts``, the routing counters from ``labels`` (usually
    one storage, passed twice)."""
    settings = sources.settings
    now = sources.clock()
    name = runtime.name
    threshold = await sources.threshold(tenant, name)
    method, model_version = await sources.active_method(tenant, runtime)
    report = await calibration.report(
        tenant, name, window_hours=WINDOW_HOURS, n_bins=settings.estimates.calibration_bins,
        eps=settings.estimates.th_eps)
    method_key = f"method:{method}:fused"
    entry = next((e for e in report if e["key"] == method_key), None)
    population = entry["population"] if entry is not None else None
    stats = (await queue.stats(tenant, runtime)).model_dump()
    monitor = await monitoring.snapshot(tenant, name, threshold)
    routes = await routing(labels, tenant, name, now=now, window_hours=WINDOW_HOURS)
    sampled, judges = await judge_figures(
        verdicts, tenant, name, [j.name for j in runtime.panel.judges], sample=JUDGE_SAMPLE)
    labelled = sum(s["labelled"] for s in stats["strata"].values())
    oldest, complete = (await oldest_waiting(verdicts, tenant, name)
                        if stats["queue_depth"] or stats["leased"] else (None, True))
    refits = await learning.refit_log.recent(tenant, name, REFITS_SHOWN)
    for entry in refits:
        entry["when"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(entry["at"]))
    return {
        "name": name,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(now)),
        "window_hours": WINDOW_HOURS,
        "method": method,
        "model_version": model_version,
        "threshold": threshold,
        "certificate": certificate(threshold),
        "cascade": runtime.cascade is not None,
        "precision": (population or {}).get("auto_accept_precision"),
        "precision_assisted": ((population or {}).get("model_assisted") or {}).get("auto_accept_precision"),
        "precision_labels": (population or {}).get("n_labels", 0),
        "window_verdicts": (population or {}).get("window_verdicts", 0),
        "stats": stats,
        "labelled": labelled,
        "queue_age": None if oldest is None else age_text(now - oldest),
        "queue_age_complete": complete,
        "monitor": monitor,
        "on_drift": runtime.panel.config.on_drift,
        "routing": routes,
        "auto_rate_window": routes.rate(routes.window),
        "auto_rate_all": routes.rate(routes.all_time),
        "judges": judges,
        "judges_sampled": sampled,
        "judge_sample": JUDGE_SAMPLE,
        "next_step": _next_step(threshold, labelled),
        "refits": refits,
        "refit_every_labels": settings.learning.refit_every_labels,
        "min_labels_for_refit": settings.learning.min_labels_for_refit,
        "monitor_evidence": bool(monitor.get("threshold_version")) and bool((monitor.get("precision") or {}).get("labels")),
    }
