"""``POST /v1/fusion/refit`` (fit, compare, maybe promote) and ``GET /v1/fusion/models``."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from judgefuse.service.deps import GatewayDep, TenantDep
from judgefuse.service.schemas import RefitRequest

router = APIRouter(prefix="/v1/fusion", tags=["fusion"])


@router.post("/refit")
async def refit(body: RefitRequest, tenant: TenantDep, gateway: GatewayDep) -> dict[str, Any]:
    outcome = await gateway.refit(tenant, body.panel)
    return outcome.as_dict()


@router.get("/models")
async def models(
    tenant: TenantDep,
    gateway: GatewayDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> dict[str, Any]:
    runtime = gateway.runtime(panel, field="query.panel")
    history = await gateway.storage.model_history(tenant, runtime.name)
    active_method, model_version = await gateway.active_method(tenant, runtime)
    return {
        "panel": runtime.name, "active_method": active_method, "model_version": model_version,
        "history": [r.model_dump() for r in history],
    }
