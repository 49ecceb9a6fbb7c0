"""``GET /v1/verdicts/{id}``: a stored verdict of the caller's tenant (another tenant's: 404)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from judgefuse.service.review.deps import VerdictsDep
from judgefuse.service.schemas import VerdictOut
from judgefuse.service.web.deps import TenantDep, json_response

router = APIRouter(prefix="/v1", tags=["verdicts"])


@router.get("/verdicts/{verdict_id}", response_model=VerdictOut)
async def get_verdict(verdict_id: str, tenant: TenantDep, verdicts: VerdictsDep) -> Response:
    """The stored verdict with its label history (every label, relabel and undo, who and
    when, oldest first)."""
    return json_response(await verdicts.get(tenant, verdict_id, history=True))
