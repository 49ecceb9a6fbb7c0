"""``GET /metrics``: Prometheus text; calibration gauges are refreshed from storage and circuit
gauges from the judges on scrape, the monitor gauges from a snapshot whose detector reports are
computed in a worker thread, a judge's vote-drift report at most ``monitoring.metrics_max_age_s``
old (:mod:`judgefuse.service.monitoring.snapshot`).

With tenant keys configured: the metrics token (``settings.web.metrics_token``) reads every series,
a tenant key only its own tenant's (:meth:`ServiceMetrics.render_for_tenant`), no key is a 401.
Open mode (no keys) is open, unless a metrics token is configured: then it is required. A
browser may sign in instead (``/signin``: a tenant key or account of role operator or viewer
reads its tenant's series, the metrics token every series); without a session it gets the
sign-in page, an API client (a scraper) the JSON 401.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from judgefuse.service.estimates.deps import CalibrationDep
from judgefuse.service.monitoring.deps import MonitoringDep
from judgefuse.service.web.deps import CallerDep, MetricsDep, PanelsDep
from judgefuse.service.web.sessions import SignInRequired, is_browser

router = APIRouter(tags=["metrics"])
log = logging.getLogger("judgefuse.service")


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request, caller: CallerDep, served: PanelsDep, registry: MetricsDep,
    calibration: CalibrationDep, monitoring: MonitoringDep,
) -> Response:
    authenticator = request.app.state.authenticator
    if authenticator.open_mode and not caller.admin:
        raise SignInRequired("/metrics needs the metrics token", next_url="/metrics",
                             browser=is_browser(request),
                             fields=[("header.authorization", "not the metrics token")])
    registry.set_circuits(
        (name, judge.name, judge.circuit) for name, runtime in served.panels.items() for judge in runtime.panel.judges
    )
    own = [] if caller.tenant is None else [caller.tenant]  # a non-admin caller without a tenant sees none
    tenants = authenticator.tenants if caller.admin else own
    try:
        for tenant in tenants:
            async for panel, key, values in calibration.gauges(tenant):
                registry.set_calibration(tenant, panel, key, values)
    except Exception as exc:  # a scrape still returns the process metrics
        log.warning("calibration gauges not refreshed: %s", type(exc).__name__)
    max_age_s = request.app.state.settings.monitoring.metrics_max_age_s
    try:
        for tenant in tenants:
            for name in served.panels:
                registry.set_monitor(tenant, name, await monitoring.current_snapshot(
                    tenant, name, max_age_s=max_age_s))
    except Exception as exc:  # a scrape still returns the process metrics
        log.warning("monitor gauges not refreshed: %s", type(exc).__name__)
    body = registry.render() if caller.admin else registry.render_for_tenant(caller.tenant or "")
    return Response(body, media_type=CONTENT_TYPE_LATEST)
