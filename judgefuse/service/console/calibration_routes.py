"""``GET /console/calibration``: the console's calibration page (it was ``/dashboard``, which now
redirects here). Server-rendered (Jinja2, autoescaped).

Shows, for the caller's tenant and every panel: each calibration key's reliability diagram
(inline SVG from :func:`judgefuse.evaluation.svg.reliability_svg`), n, accuracy, ECE, TH-Score,
Brier, TH-Score and ECE per day over the last two weeks for each fusion method (from the hour
buckets), the current threshold, this process's routing rates, judge health (valid/invalid
votes since start), cost (calls, tokens, USD) per judge and per panel since start, and a
cascade panel's stages with the verdicts each decided. Same sign-in and roles as the rest of the
console (:mod:`judgefuse.service.web.sessions`). Never shows keys of any kind.

Each section says where its figures come from: the store (calibration, population estimates,
history, the monitor: the same on every replica) or this process since it started (routing,
cost and judge health counters: one replica's share). A figure without evidence says "no
evidence yet" and why (:func:`evidence_note`), never a green "ok".

Who sees what: a tenant key shows that tenant's page, whose judge health, judge cost and cascade
tables count only that tenant's requests. The operator's metrics token (``metrics_token``)
shows the cross-tenant tables instead (:func:`_admin_panels`): judge health and cost summed over
every tenant and verdicts, routes and cost per tenant. In open mode without a metrics token the
one tenant (``default``) is all the traffic there is, and its page shows the process totals.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from judgefuse.evaluation.svg import reliability_svg
from judgefuse.service.console.deps import GatewayDep
from judgefuse.service.console.pages import console_page
from judgefuse.service.estimates.deps import CalibrationDep
from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.gateway import Gateway
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.monitoring.deps import MonitoringDep
from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.web.auth import Caller
from judgefuse.service.web.deps import CallerDep, MetricsDep

router = APIRouter(tags=["console"])
HISTORY_DAYS = 14
"""Days of "TH-Score and ECE over time" shown for each fusion method's verdicts."""


def _history_svg(history: list[dict[str, Any]], *, width: int = 420, height: int = 90) -> str:
    """Two polylines over the days: TH-Score (blue, its own scale) and ECE (red, 0..max).

    Only days with labels are drawn; every number the chart shows is also in the table beside
    it, so the chart carries no text but its title.
    """
    days = [(i, h) for i, h in enumerate(history) if h["n"]]
    if not days:
        return ""
    step = width / max(len(history) - 1, 1)

    def line(metric: str, colour: str) -> str:
        values = [(i, h[metric]) for i, h in days if h[metric] is not None]
        if not values:
            return ""
        low = min(0.0, *(v for _, v in values))
        high = max(1e-9, *(v for _, v in values))
        points = " ".join(
            f"{i * step:.1f},{height - 5 - (v - low) / (high - low) * (height - 10):.1f}" for i, v in values
        )
        return (
            f'<polyline class="{metric}" fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
            + "".join(
                f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2.5" fill="{colour}"/>'
                for p in points.split()
            )
        )

    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
        f' aria-label="TH-Score and ECE per day"><title>TH-Score (blue) and ECE (red) per day</title>'
        f'<rect width="{width}" height="{height}" fill="#fafafa" stroke="#ddd"/>'
        f"{line('th_score', '#3b6fb6')}{line('ece', '#c0392b')}</svg>"
    )


def _bound_svg(series: list[list[Any]], target: float | None, *, width: int = 420, height: int = 90) -> str:
    """The monitor's bound over audit labels: upper bound (red), lower bound (grey) and the
    target (dashed). Numbers are all in the table beside it."""
    points = [(p[1], p[3], p[4]) for p in series if p[3] is not None and p[4] is not None]
    if not points:
        return ""
    first, last = points[0][0], points[-1][0]
    span = max(last - first, 1)

    def xy(n: float, v: float) -> str:
        return f"{(n - first) / span * (width - 10) + 5:.1f},{height - 5 - v * (height - 10):.1f}"

    upper = " ".join(xy(n, u) for n, _, u in points)
    lower = " ".join(xy(n, lo) for n, lo, _ in points)
    goal = ""
    if target is not None:
        y = height - 5 - float(target) * (height - 10)
        goal = (
            f'<line class="target" x1="0" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#333" stroke-dasharray="4 3"/>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
        ' aria-label="precision bounds over audit labels"><title>auto-accept precision: upper '
        "bound (red), lower bound (grey), target (dashed), over audit labels</title>"
        f'<rect width="{width}" height="{height}" fill="#fafafa" stroke="#ddd"/>{goal}'
        f'<polyline class="upper" fill="none" stroke="#c0392b" stroke-width="2" points="{upper}"/>'
        f'<polyline class="lower" fill="none" stroke="#888" stroke-width="2" points="{lower}"/></svg>'
    )


def evidence_note(population: dict[str, Any] | None, window_hours: int = 24) -> str | None:
    """Why a key's population estimates are missing, in words (None: they are there)."""
    if population is None:
        return None
    if any((population.get(name) or {}).get("estimate") is not None for name in ("accuracy", "auto_accept_precision")):
        return None
    unsolicited = (population.get("unsolicited") or {}).get("labelled", 0)
    if not population.get("window_verdicts"):
        return f"no evidence yet: no verdict in the last {window_hours} h (the estimates cover the window's traffic)"
    if not population.get("n_labels"):
        if unsolicited:
            return (
                f"no evidence yet: none of the window's review or audit items is labelled; {unsolicited} "
                "labels of verdicts never queued (unsolicited) are left out, as they say nothing "
                "of the traffic they were picked from"
            )
        return "no evidence yet: none of the window's review or audit items is labelled (label them in /review)"
    empty = [
        s
        for s, n in population.get("labelled", {}).items()
        if not n and (population.get("represented", {}).get(s) or 0) > 0
    ]
    if empty:
        return (
            "no evidence yet for all traffic: strata without a label in the window: "
            + ", ".join(empty)
            + " (each stratum of the traffic needs labels)"
        )
    return "no evidence yet: too few labels for an interval"


@router.get("/console/calibration", response_class=HTMLResponse, include_in_schema=False)
async def calibration_page(
    request: Request,
    caller: CallerDep,
    gateway: GatewayDep,
    metrics: MetricsDep,
    calibration: CalibrationDep,
    monitoring: MonitoringDep,
) -> HTMLResponse:
    generated = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(gateway.clock()))
    if caller.tenant is None:
        return await console_page(
            request,
            caller,
            "console_calibration.html.j2",
            tenant=None,
            admin_panels=_admin_panels(request, gateway, metrics),
            panels=[],
            generated=generated,
            eps=gateway.settings.estimates.th_eps,
        )
    panels = await _tenant_panels(caller, gateway, metrics, calibration, monitoring)
    return await console_page(
        request,
        caller,
        "console_calibration.html.j2",
        tenant=caller.tenant,
        admin_panels=None,
        panels=panels,
        generated=generated,
        eps=gateway.settings.estimates.th_eps,
    )


def _zero_judge() -> dict[str, float]:
    return {"votes": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}


def _judge_tallies(
    metrics: ServiceMetrics, tenant: str, panel: str, judge: str, process_totals: bool
) -> tuple[dict[str, int], dict[str, float]]:
    """(health, cost) of one judge: the tenant's own, or the whole process's."""
    if process_totals:
        health = metrics.judge_health.get((panel, judge))
        cost = metrics.judge_cost_totals.get((panel, judge))
    else:
        health = metrics.tenant_judge_health.get((tenant, panel, judge))
        cost = metrics.tenant_judge_cost.get((tenant, panel, judge))
    return health or {"valid": 0, "invalid": 0}, cost or _zero_judge()


def _admin_panels(request: Request, gateway: Gateway, metrics: ServiceMetrics) -> list[dict[str, Any]]:
    """Every tenant's traffic in this process: per panel, judge health and cost over all tenants,
    cascade decisions, and verdicts / routes / cost per tenant."""
    tenants = request.app.state.authenticator.tenants
    panels = []
    for name, runtime in gateway.panels.items():
        judges = [
            {
                "judge": judge.name,
                "model": judge.config.model,
                **metrics.judge_health.get((name, judge.name), {"valid": 0, "invalid": 0}),
                **metrics.judge_cost_totals.get((name, judge.name), _zero_judge()),
            }
            for judge in runtime.panel.judges
        ]
        per_tenant = []
        for tenant in tenants:
            cost = metrics.panel_cost_totals.get((tenant, name), {})
            routes = metrics.route_counts.get((tenant, name), {})
            per_tenant.append(
                {
                    "tenant": tenant,
                    "verdicts": cost.get("verdicts", 0),
                    "calls": cost.get("calls", 0),
                    "usd": cost.get("usd", 0.0),
                    "auto_accept": routes.get("auto_accept", 0),
                    "human_review": routes.get("human_review", 0),
                }
            )
        panels.append(
            {
                "name": name,
                "judges": judges,
                "tenants": per_tenant,
                "cascade": metrics.cascade_counts.get(name) if runtime.cascade else None,
            }
        )
    return panels


async def _tenant_panels(
    caller: Caller,
    gateway: Gateway,
    metrics: ServiceMetrics,
    calibration: CalibrationService,
    monitoring: MonitorService,
) -> list[dict[str, Any]]:
    from judgefuse.calibration import ReliabilityBin

    tenant = caller.tenant or ""
    process_totals = caller.admin  # open mode: the one tenant is all the traffic
    settings = gateway.settings
    panels = []
    for name, runtime in gateway.panels.items():
        keys = await calibration.report(
            tenant,
            name,
            window_hours=24,
            n_bins=settings.estimates.calibration_bins,
            eps=settings.estimates.th_eps,
        )
        rows = []
        for entry in keys:
            metrics_all = entry["all_time"]
            svg = None
            if metrics_all is not None:
                bins = [
                    ReliabilityBin(
                        b["index"],
                        b["lower"],
                        b["upper"],
                        b["centre"],
                        b["count"],
                        float("nan") if b["accuracy"] is None else b["accuracy"],
                        float("nan") if b["mean_confidence"] is None else b["mean_confidence"],
                    )
                    for b in metrics_all["reliability"]
                ]
                # reliability_svg escapes every text it writes
                svg = Markup(reliability_svg(bins, title=entry["key"]))  # noqa: S704
            history = None
            if entry["kind"] == "method" and entry["storage_key"] is not None:
                history = await calibration.history(
                    tenant,
                    entry["storage_key"],
                    days=HISTORY_DAYS,
                    n_bins=settings.estimates.calibration_bins,
                    eps=settings.estimates.th_eps,
                )
            rows.append(
                {
                    "entry": entry,
                    "m": metrics_all,
                    "w": entry["window"],
                    "svg": svg,
                    "history": history,
                    "evidence": evidence_note(entry.get("population")),
                    "history_svg": Markup(_history_svg(history)) if history else None,
                }
            )  # noqa: S704
        threshold = await gateway.threshold(tenant, name)
        monitor = await monitoring.snapshot(tenant, name, threshold)
        monitor["on_drift"] = runtime.panel.config.on_drift
        monitor["svg"] = Markup(_bound_svg(monitor["series"], monitor["target"]))  # noqa: S704
        active_method, model_version = await gateway.active_method(tenant, runtime)
        routes = metrics.route_counts.get((tenant, name), {"auto_accept": 0, "human_review": 0})
        total = sum(routes.values())
        tallies = {
            judge.name: _judge_tallies(metrics, tenant, name, judge.name, process_totals)
            for judge in runtime.panel.judges
        }
        health = [{"judge": judge.name, **tallies[judge.name][0]} for judge in runtime.panel.judges]
        judge_cost = [
            {"judge": judge.name, "model": judge.config.model, **tallies[judge.name][1]}
            for judge in runtime.panel.judges
        ]
        totals = metrics.panel_cost_totals.get(
            (tenant, name), {"verdicts": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}
        )
        n_verdicts = totals["verdicts"]
        panel_cost: dict[str, float | None] = {
            **totals,
            "usd_per_verdict": totals["usd"] / n_verdicts if n_verdicts else None,
            "calls_per_verdict": totals["calls"] / n_verdicts if n_verdicts else None,
        }
        cascade = None
        if runtime.cascade is not None:
            decided = (
                metrics.cascade_counts.get(name, {})
                if process_totals
                else metrics.tenant_cascade_counts.get((tenant, name), {})
            )
            stages = runtime.cascade.all_stages()
            cascade = {
                "fallback": runtime.cascade.fallback,
                "stages": [
                    {
                        "index": i + 1,
                        "name": st.name,
                        "judges": ", ".join(st.judges),
                        "threshold": st.threshold,
                        "decided": decided.get(f"{i + 1}:{st.name}", 0),
                    }
                    for i, st in enumerate(stages)
                ],
                "review": decided.get("review", 0),
            }
        panels.append(
            {
                "name": name,
                "rows": rows,
                "threshold": threshold,
                "active_method": active_method,
                "model_version": model_version,
                "routes": routes,
                "routes_total": total,
                "auto_rate": routes.get("auto_accept", 0) / total if total else None,
                "health": health,
                "judge_cost": judge_cost,
                "cost": panel_cost,
                "cascade": cascade,
                "monitor": monitor,
            }
        )
    return panels
