"""``GET /v1/thresholds?panel=`` (latest + history) and ``POST /v1/thresholds/tune``."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from judgefuse.service.responses import ThresholdOut, ThresholdsOut, TuneOut
from judgefuse.service.schemas import TuneRequest
from judgefuse.service.storage import ThresholdRecord
from judgefuse.service.web.deps import GatewayDep, TenantDep

router = APIRouter(prefix="/v1/thresholds", tags=["thresholds"])


def _public(record: ThresholdRecord) -> ThresholdOut:
    return ThresholdOut(**record.model_dump(),
                        review_everything=bool(record.details.get("review_everything")))


@router.get("")
async def thresholds(
    tenant: TenantDep,
    gateway: GatewayDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ThresholdsOut:
    runtime = gateway.runtime(panel, field="query.panel")
    history = await gateway.storage.threshold_history(tenant, runtime.name)
    active_method, model_version = await gateway.active_method(tenant, runtime)
    return ThresholdsOut(
        panel=runtime.name,
        active_method=active_method,
        model_version=model_version,
        current=_public(history[-1]) if history else None,
        history=[_public(r) for r in history],
    )


@router.post("/tune")
async def tune(body: TuneRequest, tenant: TenantDep, gateway: GatewayDep) -> TuneOut:
    """Tune from the labelled store; a qualifying threshold is stored as a new version.

    No qualifying threshold: when too few labels made every candidate untestable nothing is
    stored (the current threshold stays); when tested candidates all failed, a "review
    everything" version is stored (the data contradicts any threshold).
    """
    return TuneOut.model_validate(await gateway.tune(tenant, body))
