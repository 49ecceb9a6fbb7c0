"""``POST /v1/fusion/refit`` (fit, compare, maybe promote; or, with ``cold_start: true``, fit the
panel's label-free method on its stored votes) and ``GET /v1/fusion/models``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.learning.deps import LearningDep
from judgefuse.service.responses import ModelsOut, RefitOut
from judgefuse.service.schemas import RefitRequest
from judgefuse.service.web.deps import PanelsDep, TenantDep

router = APIRouter(prefix="/v1/fusion", tags=["fusion"])


@router.post("/refit")
async def refit(body: RefitRequest, tenant: TenantDep, learning: LearningDep) -> RefitOut:
    if body.cold_start:
        outcome = await learning.cold_start_fit(tenant, body.panel)
    else:
        outcome = await learning.refit(tenant, body.panel, method=body.method)
    return RefitOut.model_validate(outcome.as_dict())


@router.get("/models")
async def models(
    tenant: TenantDep,
    served: PanelsDep,
    learning: LearningDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ModelsOut:
    return await learning.models(tenant, served.runtime(panel, field="query.panel"))
