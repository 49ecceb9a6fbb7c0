"""``POST /v1/fusion/refit`` (fit, compare, maybe promote; or, with ``cold_start: true``, fit the
panel's label-free method on its stored votes), ``GET /v1/fusion/models`` and
``GET /v1/fusion/refits`` (every refit's outcome and reason, :mod:`.refit_log`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.learning.deps import LearningDep
from judgefuse.service.responses import ModelsOut, RefitOut, RefitsOut
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


@router.get("/refits")
async def refits(
    tenant: TenantDep,
    served: PanelsDep,
    learning: LearningDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    limit: Annotated[int, Query(ge=1, le=50)] = 20,
) -> RefitsOut:
    """The panel's newest refits and cold-start fits (background, API, tune, console), newest
    first: when, what started it, the outcome (``promoted``, ``kept``, ``skipped``, ``failed``)
    and why, the labels it saw, the model version promoted and its metrics."""
    return RefitsOut.model_validate(
        await learning.refits(tenant, served.runtime(panel, field="query.panel"), limit))
