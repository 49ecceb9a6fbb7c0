"""``/console`` (overview), ``/console/verdicts`` (the list), ``/console/verdicts/{id}`` (one).

Who sees what: a tenant key (or a session signed in with it, or with an operator or viewer
account of the tenant) sees its own tenant's panels, verdicts and figures; the operator's metrics
token sees every tenant's overview figures side by side but no verdict (questions and answers
are the tenant's data); in open mode the one tenant ``default`` is everything. Annotator
credentials and sessions are refused (they have ``/review``). A browser without a session gets
the sign-in page (docs/console.md, 'Signing in').

The pages are HTML with a strict Content-Security-Policy: no resource from elsewhere, only the
inline style and the overview's small inline refresh script, forms posting nowhere but here.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse

from judgefuse.judges.types import LETTERS
from judgefuse.service.console.deps import GatewayDep
from judgefuse.service.console.overview import ConsoleSources, panel_overview
from judgefuse.service.console.pages import console_page
from judgefuse.service.console.replica import replica_figures
from judgefuse.service.console.verdict_list import FILTER_FIELDS, ListParams, show_time
from judgefuse.service.console.verdict_view import verdict_view
from judgefuse.service.errors import NotFound
from judgefuse.service.estimates.deps import CalibrationDep
from judgefuse.service.learning.deps import LearningDep
from judgefuse.service.monitoring.deps import MonitoringDep
from judgefuse.service.review.deps import ReviewQueueDep
from judgefuse.service.web.auth import Caller
from judgefuse.service.web.deps import CallerDep

router = APIRouter(tags=["console"])

REFRESH_S = 30
"""How often the overview reloads its figures in the background."""
SCAN_LIMIT = 1000
"""Records one list page may examine (see ``Storage.list_verdicts``)."""


def _tenant_of(caller: Caller) -> str:
    """The tenant whose verdicts a caller may read (the operator token reads none)."""
    if caller.tenant is None:
        raise NotFound("the verdicts are a tenant's: open the console with the tenant's API key "
                       "(the operator token shows the overview only)")
    return caller.tenant


@router.get("/console", response_class=HTMLResponse, include_in_schema=False)
async def overview(
    request: Request, caller: CallerDep, gateway: GatewayDep, calibration: CalibrationDep,
    queue: ReviewQueueDep, monitoring: MonitoringDep, learning: LearningDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    refresh: Annotated[int, Query(ge=2, le=3600)] = REFRESH_S,
) -> HTMLResponse:
    """``refresh``: seconds between the page's background reloads of its figures."""
    sources: ConsoleSources = gateway
    runtimes = [gateway.runtime(panel, field="query.panel")] if panel else list(gateway.panels.values())
    tenants = ([caller.tenant] if caller.tenant is not None
               else list(request.app.state.authenticator.tenants))
    views = []
    # the page reads stored verdicts (the queue's age, the judges' figures): one place of the
    # report gate for all of it (judgefuse.service.estimates.reports)
    async with calibration.reports.admit(caller.tenant or "-", "console_overview"):
        for tenant in tenants:
            for runtime in runtimes:
                views.append({"tenant": tenant, **await panel_overview(
                    tenant, runtime, sources, calibration=calibration, queue=queue,
                    monitoring=monitoring, learning=learning, verdicts=gateway.storage,
                    labels=gateway.storage)})
    replica = replica_figures(request.app.state.metrics,
                              None if caller.tenant is None else [caller.tenant])
    return await console_page(request, caller, "console_overview.html.j2", views=views, operator=caller.tenant is None,
                 tenant=caller.tenant, refresh_s=refresh, panels=list(gateway.panels),
                 selected=panel, replica=replica)


@router.get("/console/verdicts", response_class=HTMLResponse, include_in_schema=False)
async def verdict_list(request: Request, caller: CallerDep, gateway: GatewayDep) -> HTMLResponse:
    tenant = _tenant_of(caller)
    params = dict(request.query_params)
    runtime = gateway.runtime(params.get("panel") or None, field="query.panel")
    checked = ListParams(runtime.name, params)
    # up to SCAN_LIMIT records read and parsed (off the loop when large): a place of the report
    # gate, not a cache (every new verdict changes the page)
    async with gateway.calibration.reports.admit(tenant, "console_verdicts"):
        page = await gateway.storage.list_verdicts(
            tenant, checked.query, after=checked.after, limit=checked.limit, scan_limit=SCAN_LIMIT)
    rows = [_row(record) for record in page.records]
    presets = _presets(checked)
    return await console_page(request, caller, "console_verdicts.html.j2", tenant=tenant, panel=runtime.name,
                 panels=list(gateway.panels), params=checked, raw=checked.raw, rows=rows, page=page,
                 next_link=checked.link(after=page.next.token()) if page.next else None,
                 first_link=checked.link(after=None) if checked.after else None,
                 presets=presets, since_value=show_time(checked.query.since),
                 until_value=show_time(checked.query.until), filter_fields=FILTER_FIELDS)


def _presets(params: ListParams) -> list[tuple[str, str]]:
    base = ListParams(params.panel, {})
    return [
        ("all", base.link()),
        ("waiting for review", base.link(route="human_review", labelled="0")),
        ("auto-accepted", base.link(route="auto_accept")),
        ("wrong", base.link(wrong="1")),
        ("judges disagree", base.link(disagreeing="1")),
        ("confidence < 0.7", base.link(below="0.7")),
        ("labelled", base.link(labelled="1")),
    ]


def _row(record: Any) -> dict[str, Any]:
    verdict = record.verdict
    choices = [v.choice for v in verdict.votes]
    stamp = record.review
    return {
        "id": record.id, "created": show_time(record.created_at).replace("T", " "),
        "choice": verdict.choice or "–", "confidence": verdict.confidence,
        "route": (stamp.route if stamp and stamp.route else verdict.route) or "–",
        "stratum": stamp.stratum if stamp else "–", "label": record.label or "",
        "wrong": record.label in LETTERS and verdict.choice != record.label,
        "votes": f"A {choices.count('A')} · B {choices.count('B')}"
                 + (f" · failed {choices.count(None)}" if None in choices else ""),
        "disagree": len({c for c in choices if c is not None}) > 1,
        "question": (record.item.question[:90] if record.item else ""),
    }


@router.get("/console/verdicts/{verdict_id}", response_class=HTMLResponse, include_in_schema=False)
async def verdict_page(
    request: Request, caller: CallerDep, gateway: GatewayDep,
    verdict_id: Annotated[str, Path(min_length=1, max_length=256)],
) -> HTMLResponse:
    tenant = _tenant_of(caller)
    record = await gateway.storage.get_verdict(tenant, verdict_id)
    if record is None:
        raise NotFound(f"no verdict {verdict_id!r} for this tenant")
    threshold = None
    if record.threshold_version is not None:
        threshold = await gateway.storage.get_threshold(tenant, record.panel, version=record.threshold_version)
    history = await gateway.storage.label_history(tenant, verdict_id)
    return await console_page(request, caller, "console_verdict.html.j2", tenant=tenant,
                 v=verdict_view(record, threshold, history),
                 back=ListParams(record.panel, {}).link(), panels=list(gateway.panels))
