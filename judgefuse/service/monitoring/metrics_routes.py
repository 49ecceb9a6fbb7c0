"""``GET /metrics``: Prometheus text; calibration gauges are refreshed from storage and circuit
gauges from the judges on scrape.

With tenant keys configured: the metrics token (``settings.metrics_token``) reads every series,
a tenant key only its own tenant's (:meth:`ServiceMetrics.render_for_tenant`), no key is a 401.
Open mode (no keys) is open, unless a metrics token is configured: then it is required.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from judgefuse.service.errors import Unauthorized
from judgefuse.service.estimates.calibration_store import metrics_json
from judgefuse.service.ledger import parse_key
from judgefuse.service.web.deps import CallerDep, GatewayDep, MetricsDep

router = APIRouter(tags=["metrics"])
log = logging.getLogger("judgefuse.service")


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request, caller: CallerDep, gateway: GatewayDep, registry: MetricsDep
) -> Response:
    authenticator = request.app.state.authenticator
    if authenticator.open_mode and not caller.admin:
        raise Unauthorized("/metrics needs the metrics token",
                           fields=[("header.authorization", "not the metrics token")])
    settings = gateway.settings
    registry.set_circuits(
        (name, judge.name, judge.circuit) for name, runtime in gateway.panels.items() for judge in runtime.panel.judges
    )
    own = [] if caller.tenant is None else [caller.tenant]  # a non-admin caller without a tenant sees none
    tenants = authenticator.tenants if caller.admin else own
    try:
        for tenant in tenants:
            for raw in await gateway.storage.list_accumulators(tenant):
                try:
                    key = parse_key(raw)
                except ValueError:
                    continue
                if key.kind in ("abstain", "traffic"):
                    continue
                fields = await gateway.storage.read_accumulator(tenant, raw)
                values = metrics_json(fields, n_bins=settings.calibration_bins, eps=settings.th_eps)
                registry.set_calibration(
                    tenant, key.panel, f"{key.kind}:{key.name}:{key.mode}", values
                )
    except Exception as exc:  # a scrape still returns the process metrics
        log.warning("calibration gauges not refreshed: %s", type(exc).__name__)
    try:
        for tenant in tenants:
            for name in gateway.panels:
                threshold = await gateway.storage.get_threshold(tenant, name)
                registry.set_monitor(tenant, name,
                                     await gateway.monitors.snapshot(tenant, name, threshold))
    except Exception as exc:  # a scrape still returns the process metrics
        log.warning("monitor gauges not refreshed: %s", type(exc).__name__)
    body = registry.render() if caller.admin else registry.render_for_tenant(caller.tenant or "")
    return Response(body, media_type=CONTENT_TYPE_LATEST)
