"""``GET /v1/thresholds?panel=`` (latest + history) and ``POST /v1/thresholds/tune``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.learning.deps import LearningDep
from judgefuse.service.responses import ThresholdsOut, TuneOut
from judgefuse.service.schemas import TuneRequest
from judgefuse.service.web.deps import PanelsDep, TenantDep

router = APIRouter(prefix="/v1/thresholds", tags=["thresholds"])


@router.get("")
async def thresholds(
    tenant: TenantDep,
    served: PanelsDep,
    learning: LearningDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ThresholdsOut:
    return await learning.thresholds(tenant, served.runtime(panel, field="query.panel"))


@router.post("/tune")
async def tune(body: TuneRequest, tenant: TenantDep, learning: LearningDep) -> TuneOut:
    """Tune from the labelled store; a qualifying threshold is stored as a new version.

    No qualifying threshold: when too few labels made every candidate untestable nothing is
    stored (the current threshold stays); when tested candidates all failed, a "review
    everything" version is stored (the data contradicts any threshold).
    """
    return TuneOut.model_validate(await learning.tune(tenant, body))
