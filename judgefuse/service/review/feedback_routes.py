"""``POST /v1/feedback``: label a verdict (idempotent: labelled / relabelled / unchanged)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from judgefuse.service.schemas import FeedbackRequest, LabelResult
from judgefuse.service.web.deps import LabelsDep, TenantDep, json_response

router = APIRouter(prefix="/v1", tags=["feedback"])


@router.post("/feedback", response_model=LabelResult)
async def feedback(body: FeedbackRequest, tenant: TenantDep, labels: LabelsDep) -> Response:
    """A relabel replaces the old label in every accumulator; the same label again is a no-op.
    ``tie`` and ``both_bad`` are stored and counted apart, never in accuracy or calibration."""
    return json_response(await labels.feedback(tenant, body.verdict_id, body.label, body.comment))
