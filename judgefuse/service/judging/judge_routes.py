"""``POST /v1/judge`` (one pair), ``POST /v1/judge/batch`` (bounded; per-item status), and
their bring-your-own-votes twins ``POST /v1/fuse`` and ``POST /v1/fuse/batch``: each hands its
body to the judging service (:class:`~judgefuse.service.judging.pipeline.JudgePipeline`)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from judgefuse.service.judging.deps import JudgingDep
from judgefuse.service.schemas import (
    BatchRequest,
    BatchResponse,
    FuseBatchRequest,
    FuseRequest,
    JudgeRequest,
    VerdictOut,
)
from judgefuse.service.web.deps import TenantDep, json_response

router = APIRouter(prefix="/v1", tags=["judge"])


@router.post("/judge", response_model=VerdictOut)
async def judge(body: JudgeRequest, tenant: TenantDep, judging: JudgingDep) -> Response:
    """Judge one pair: every judge concurrently (a cascade panel: stage by stage, cheapest first),
    fused, routed, stored. The response carries ``cost`` (calls, tokens, USD) and, for a
    cascade, the deciding ``cascade`` stage."""
    return json_response(await judging.judge(tenant, body))


@router.post("/judge/batch", response_model=BatchResponse)
async def judge_batch(body: BatchRequest, tenant: TenantDep, judging: JudgingDep) -> Response:
    """Judge up to ``max_batch_items`` pairs concurrently; each result carries its own status.
    Items refused by admission control have status 429 and ``retry_after_s`` in their error;
    the answer then carries ``Retry-After`` (the longest of theirs)."""
    batch = await judging.batch(tenant, body.items)
    response = json_response(batch)
    waits = [int(r.error["retry_after_s"]) for r in batch.results
             if r.status == 429 and r.error and r.error.get("retry_after_s") is not None]
    if waits:
        response.headers["Retry-After"] = str(max(waits))
    return response


@router.post("/fuse", response_model=VerdictOut)
async def fuse(body: FuseRequest, tenant: TenantDep, judging: JudgingDep) -> Response:
    """Bring your own votes: fuse, route, stamp and store votes cast elsewhere, exactly as
    ``/v1/judge`` does its judges' (the panel declares such judges ``external: true``). A vote
    for a judge the panel does not have, or fewer valid votes than its quorum, is a 422."""
    return json_response(await judging.judge(tenant, body))


@router.post("/fuse/batch", response_model=BatchResponse)
async def fuse_batch(body: FuseBatchRequest, tenant: TenantDep, judging: JudgingDep) -> Response:
    """Up to ``max_batch_items`` ``/v1/fuse`` bodies; each result carries its own status."""
    return json_response(await judging.batch(tenant, body.items))
