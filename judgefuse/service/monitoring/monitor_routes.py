"""``GET /v1/monitor?panel=`` (the precision monitor of the current threshold version, judge
drift, events) and ``POST /v1/monitor/clear`` (an operator ends an alarm).

See :mod:`judgefuse.service.monitoring.monitor` for what the monitor guarantees and what an alarm does.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.monitoring.deps import MonitoringDep
from judgefuse.service.schemas import MonitorClearOut, MonitorClearRequest, MonitorOut
from judgefuse.service.web.deps import PanelsDep, TenantDep

router = APIRouter(prefix="/v1/monitor", tags=["monitor"])


@router.get("", response_model=MonitorOut)
async def monitor(
    tenant: TenantDep,
    served: PanelsDep,
    monitoring: MonitoringDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> MonitorOut:
    return await monitoring.report(tenant, served.runtime(panel, field="query.panel"))


@router.post("/clear", response_model=MonitorClearOut)
async def clear(
    body: MonitorClearRequest, tenant: TenantDep, served: PanelsDep, monitoring: MonitoringDep
) -> MonitorClearOut:
    """End the alarm of the panel's current threshold version and restart its monitor (the
    evidence is kept in a ``clear`` event). Not in alarm: nothing is written."""
    return await monitoring.clear(tenant, served.runtime(body.panel, field="body.panel"))
