"""``POST /v1/feedback``: label a verdict (idempotent: labelled / relabelled / unchanged)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from judgefuse.service.review.annotator_labels import label_as
from judgefuse.service.review.deps import LabelsDep
from judgefuse.service.schemas import FeedbackRequest, LabelResult
from judgefuse.service.web.deps import AccountsDep, ReviewerDep, json_response

router = APIRouter(prefix="/v1", tags=["feedback"])


@router.post("/feedback", response_model=LabelResult)
async def feedback(
    body: FeedbackRequest, principal: ReviewerDep, labels: LabelsDep, accounts: AccountsDep
) -> Response:
    """A relabel replaces the old label in every accumulator; the same label again is a no-op.
    ``tie`` and ``both_bad`` are stored and counted apart, never in accuracy or calibration.
    An annotator credential labels within its panels (403 otherwise); its labels make its
    history (``GET /v1/annotators/me``)."""
    return json_response(await label_as(principal, labels, accounts, body.verdict_id, body.label,
                                        body.comment))
