"""The review queue over HTTP: ``GET /v1/review/next`` (lease), ``POST /v1/review/skip``
(release), ``GET /v1/review/stats``. Labels go through ``POST /v1/feedback`` as always (a
label removes the item from the queue and ends any lease on it, whoever holds it).

See :mod:`judgefuse.service.review.queue` for the order (random), the annotator identity and
what an item shows.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from judgefuse.service.errors import FieldProblem, NotFound
from judgefuse.service.judging.request_checks import check_verdict_id
from judgefuse.service.responses import ReviewNextOut, ReviewSkipOut, ReviewStatsOut
from judgefuse.service.review.queue import annotator_name, item_out
from judgefuse.service.schemas import ReviewSkipRequest
from judgefuse.service.web.deps import GatewayDep, ReviewQueueDep, SettingsDep, TenantDep

router = APIRouter(prefix="/v1/review", tags=["review"])


@router.get("/next")
async def next_items(
    tenant: TenantDep,
    gateway: GatewayDep,
    queue: ReviewQueueDep,
    settings: SettingsDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    n: Annotated[int, Query()] = 1,
    annotator: Annotated[str | None, Query()] = None,
    x_annotator: Annotated[str | None, Header()] = None,
) -> ReviewNextOut:
    """Lease up to ``n`` pending items of the panel's queue to one annotator, in random order
    (two annotators never hold the same item; an expired lease returns the item)."""
    limit = settings.review.review_max_lease
    if not 1 <= n <= limit:
        raise FieldProblem("query.n", f"must be between 1 and {limit}")
    runtime = gateway.runtime(panel, field="query.panel")
    who = annotator_name(tenant, annotator, x_annotator, field="query.annotator")
    leases = await queue.lease(tenant, runtime.name, n=n, annotator=who)
    return ReviewNextOut(panel=runtime.name, annotator=who,
                         items=[item_out(lease, runtime) for lease in leases])


@router.post("/skip")
async def skip(
    body: ReviewSkipRequest,
    tenant: TenantDep,
    queue: ReviewQueueDep,
    x_annotator: Annotated[str | None, Header()] = None,
) -> ReviewSkipOut:
    """Give a leased item back to the queue (at its random rank). 404 when this annotator
    holds no live lease on it."""
    check_verdict_id(tenant, body.verdict_id)
    who = annotator_name(tenant, body.annotator, x_annotator, field="body.annotator")
    released = await queue.release(tenant, body.verdict_id, who)
    if not released:
        raise NotFound(f"annotator {who!r} holds no live lease on verdict {body.verdict_id!r}",
                       fields=[("body.verdict_id", "not leased by this annotator")])
    return ReviewSkipOut(verdict_id=body.verdict_id, annotator=who, released=True)


@router.get("/stats")
async def stats(
    tenant: TenantDep,
    gateway: GatewayDep,
    queue: ReviewQueueDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ReviewStatsOut:
    """Per stratum (review, audit, none): verdicts routed, queued, leased, labelled, and the
    labelled share (for ``none``, labels are unsolicited). ``audit_plan``: the audit rate new
    verdicts get (the static ``audit_rate``, or planned from ``label_budget_per_day`` and the
    last day's traffic), the expected half-width it buys and the expected time to detect a
    10-point precision drop (:mod:`judgefuse.service.review.audit_plan`)."""
    return await queue.stats(tenant, gateway.runtime(panel, field="query.panel"))
