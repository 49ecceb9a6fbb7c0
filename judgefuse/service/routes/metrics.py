"""``GET /metrics``: Prometheus text; calibration gauges are refreshed from storage on scrape."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from judgefuse.service.calibration_store import metrics_json, parse_key
from judgefuse.service.deps import GatewayDep, MetricsDep

router = APIRouter(tags=["metrics"])
log = logging.getLogger("judgefuse.service")


@router.get("/metrics", include_in_schema=False)
async def metrics(request: Request, gateway: GatewayDep, registry: MetricsDep) -> Response:
    settings = gateway.settings
    try:
        for tenant in request.app.state.authenticator.tenants:
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
    return Response(registry.render(), media_type=CONTENT_TYPE_LATEST)
