"""``GET /v1/monitor?panel=`` (the precision monitor of the current threshold version, judge
drift, events) and ``POST /v1/monitor/clear`` (an operator ends an alarm).

See :mod:`judgefuse.service.monitoring.monitor` for what the monitor guarantees and what an alarm does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.errors import FieldProblem
from judgefuse.service.schemas import MonitorClearOut, MonitorClearRequest, MonitorEventOut, MonitorOut
from judgefuse.service.web.deps import GatewayDep, TenantDep

router = APIRouter(prefix="/v1/monitor", tags=["monitor"])

EVENTS_SHOWN = 50


@router.get("", response_model=MonitorOut)
async def monitor(
    tenant: TenantDep,
    gateway: GatewayDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> MonitorOut:
    runtime = gateway.runtime(panel, field="query.panel")
    threshold = await gateway.storage.get_threshold(tenant, runtime.name)
    snap = await gateway.monitors.snapshot(tenant, runtime.name, threshold)
    events = await gateway.storage.monitor_events(tenant, runtime.name, limit=EVENTS_SHOWN)
    return MonitorOut(
        panel=runtime.name, on_drift=runtime.panel.config.on_drift,
        events=[MonitorEventOut(**e.model_dump(exclude={"panel"})) for e in events],
        **{k: v for k, v in snap.items() if k != "alarm"},
    )


@router.post("/clear", response_model=MonitorClearOut)
async def clear(body: MonitorClearRequest, tenant: TenantDep, gateway: GatewayDep) -> MonitorClearOut:
    """End the alarm of the panel's current threshold version and restart its monitor (the
    evidence is kept in a ``clear`` event). Not in alarm: nothing is written."""
    runtime = gateway.runtime(body.panel, field="body.panel")
    threshold = await gateway.storage.get_threshold(tenant, runtime.name)
    if threshold is None:
        raise FieldProblem("body.panel", f"panel {runtime.name!r} has no threshold tuned: "
                                         "no monitor to clear")
    event = await gateway.monitors.clear(tenant, runtime.name, threshold)
    return MonitorClearOut(
        panel=runtime.name, threshold_version=threshold.version, cleared=event is not None,
        event=None if event is None else MonitorEventOut(**event.model_dump(exclude={"panel"})),
    )
