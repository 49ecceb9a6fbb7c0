"""``POST /v1/fusion/refit`` (fit, compare, maybe promote; or, with ``cold_start: true``, fit the
panel's label-free method on its stored votes) and ``GET /v1/fusion/models``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.responses import ModelsOut, RefitOut
from judgefuse.service.schemas import RefitRequest
from judgefuse.service.web.deps import GatewayDep, TenantDep

router = APIRouter(prefix="/v1/fusion", tags=["fusion"])


@router.post("/refit")
async def refit(body: RefitRequest, tenant: TenantDep, gateway: GatewayDep) -> RefitOut:
    if body.cold_start:
        outcome = await gateway.cold_start_fit(tenant, body.panel)
    else:
        outcome = await gateway.refit(tenant, body.panel, method=body.method)
    return RefitOut.model_validate(outcome.as_dict())


@router.get("/models")
async def models(
    tenant: TenantDep,
    gateway: GatewayDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ModelsOut:
    runtime = gateway.runtime(panel, field="query.panel")
    history = await gateway.storage.model_history(tenant, runtime.name)
    active_method, model_version = await gateway.active_method(tenant, runtime)
    return ModelsOut(
        panel=runtime.name, active_method=active_method, model_version=model_version,
        history=list(history),
    )
