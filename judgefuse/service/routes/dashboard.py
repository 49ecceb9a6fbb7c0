"""``GET /dashboard``: server-rendered (Jinja2, autoescaped) calibration and routing overview.

Shows, for the caller's tenant and every panel: each calibration key's reliability diagram
(inline SVG from :func:`judgefuse.evaluation.svg.reliability_svg`), n, accuracy, ECE, TH-Score,
Brier, TH-Score and ECE per day over the last two weeks for each fusion method (from the hour
buckets), the current threshold, this process's routing rates, judge health (valid/invalid
votes since start), cost (calls, tokens, USD) per judge and per panel since start, and a
cascade panel's stages with the verdicts each decided. Same authentication as the API. Never
shows keys of any kind.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from judgefuse.evaluation.svg import reliability_svg
from judgefuse.service.calibration_store import calibration_history, calibration_report
from judgefuse.service.deps import GatewayDep, MetricsDep, TenantDep

router = APIRouter(tags=["dashboard"])
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
        return (f'<polyline class="{metric}" fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>'
                + "".join(f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2.5" fill="{colour}"/>'
                          for p in points.split()))

    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img"'
            f' aria-label="TH-Score and ECE per day"><title>TH-Score (blue) and ECE (red) per day</title>'
            f'<rect width="{width}" height="{height}" fill="#fafafa" stroke="#ddd"/>'
            f'{line("th_score", "#3b6fb6")}{line("ece", "#c0392b")}</svg>')


def _usd(value: float) -> str:
    """Money to 6 significant digits (judge calls cost fractions of a cent)."""
    return f"${value:.6g}" if value else "$0"


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


@router.get("/dashboard", response_class=HTMLResponse, include_in_schema=False)
async def dashboard(
    request: Request, tenant: TenantDep, gateway: GatewayDep, metrics: MetricsDep
) -> HTMLResponse:
    from judgefuse.calibration import ReliabilityBin

    settings = gateway.settings
    panels = []
    for name, runtime in gateway.panels.items():
        keys = await calibration_report(
            gateway.storage, tenant, name, window_hours=24, n_bins=settings.calibration_bins,
            eps=settings.th_eps, now=gateway.clock(),
        )
        rows = []
        for entry in keys:
            metrics_all = entry["all_time"]
            svg = None
            if metrics_all is not None:
                bins = [
                    ReliabilityBin(b["index"], b["lower"], b["upper"], b["centre"], b["count"],
                                   float("nan") if b["accuracy"] is None else b["accuracy"],
                                   float("nan") if b["mean_confidence"] is None
                                   else b["mean_confidence"])
                    for b in metrics_all["reliability"]
                ]
                # reliability_svg escapes every text it writes
                svg = Markup(reliability_svg(bins, title=entry["key"]))  # noqa: S704
            history = None
            if entry["kind"] == "method" and entry["storage_key"] is not None:
                history = await calibration_history(
                    gateway.storage, tenant, entry["storage_key"], days=HISTORY_DAYS,
                    now=gateway.clock(), n_bins=settings.calibration_bins, eps=settings.th_eps,
                )
            rows.append({"entry": entry, "m": metrics_all, "w": entry["window"], "svg": svg,
                         "history": history,
                         "history_svg": Markup(_history_svg(history)) if history else None})  # noqa: S704
        threshold = await gateway.threshold(tenant, name)
        active_method, model_version = await gateway.active_method(tenant, runtime)
        routes = metrics.route_counts.get((tenant, name), {"auto_accept": 0, "human_review": 0})
        total = sum(routes.values())
        health = [
            {"judge": judge.name, **metrics.judge_health.get((name, judge.name),
                                                             {"valid": 0, "invalid": 0})}
            for judge in runtime.panel.judges
        ]
        judge_cost = [
            {"judge": judge.name, "model": judge.config.model,
             **metrics.judge_cost_totals.get((name, judge.name), {
                 "votes": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0})}
            for judge in runtime.panel.judges
        ]
        panel_cost = dict(metrics.panel_cost_totals.get((tenant, name), {
            "verdicts": 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}))
        n_verdicts = panel_cost["verdicts"]
        panel_cost["usd_per_verdict"] = panel_cost["usd"] / n_verdicts if n_verdicts else None
        panel_cost["calls_per_verdict"] = panel_cost["calls"] / n_verdicts if n_verdicts else None
        cascade = None
        if runtime.cascade is not None:
            decided = metrics.cascade_counts.get(name, {})
            stages = runtime.cascade.all_stages()
            cascade = {
                "fallback": runtime.cascade.fallback,
                "stages": [
                    {"index": i + 1, "name": st.name, "judges": ", ".join(st.judges),
                     "threshold": st.threshold, "decided": decided.get(f"{i + 1}:{st.name}", 0)}
                    for i, st in enumerate(stages)
                ],
                "review": decided.get("review", 0),
            }
        panels.append({
            "name": name, "rows": rows, "threshold": threshold, "active_method": active_method,
            "model_version": model_version, "routes": routes, "routes_total": total,
            "auto_rate": routes.get("auto_accept", 0) / total if total else None,
            "health": health, "judge_cost": judge_cost, "cost": panel_cost, "cascade": cascade,
        })
    html = request.app.state.templates.get_template("dashboard.html.j2").render(
        tenant=tenant, panels=panels, fmt=_fmt, usd=_usd, eps=settings.th_eps,
        generated=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(gateway.clock())),
    )
    return HTMLResponse(html)
