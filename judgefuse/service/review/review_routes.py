"""The review queue over HTTP: ``GET /v1/review/next`` (lease), ``POST /v1/review/skip``
(release), ``GET /v1/review/stats``. Labels go through ``POST /v1/feedback`` as always (a
label removes the item from the queue and ends any lease on it, whoever holds it).

See :mod:`judgefuse.service.review.queue` for the order (random), the annotator identity and
what an item shows.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Query

from judgefuse.service.errors import FieldProblem, Forbidden, NotFound
from judgefuse.service.kernel.stored_text import check_verdict_id
from judgefuse.service.responses import ReviewNextOut, ReviewSkipOut, ReviewStatsOut
from judgefuse.service.review.deps import ReviewQueueDep
from judgefuse.service.review.queue import annotator_name, item_out
from judgefuse.service.schemas import ReviewSkipRequest
from judgefuse.service.web.auth import Principal
from judgefuse.service.web.deps import PanelsDep, ReviewerDep, SettingsDep, TenantDep

router = APIRouter(prefix="/v1/review", tags=["review"])


def _who(principal: Principal, query: str | None, header: str | None, *, field: str) -> str:
    """The annotator: an annotator credential is its account (naming anyone else is a 403);
    a tenant key names whoever it leases for (:func:`annotator_name`)."""
    account = principal.account
    if account is None:
        return annotator_name(principal.tenant, query, header, field=field)
    for given in (query, header):
        if given is not None and given.strip() != account.name:
            raise Forbidden(f"an annotator credential acts as {account.name!r} only",
                            fields=[(field, "not this credential's annotator")])
    return account.name


def _caller(principal: Principal) -> str | None:
    """Whose per-caller lease cap applies: the tenant key's (an account has its own cap)."""
    return "tenant-key" if principal.account is None else None


@router.get("/next")
async def next_items(
    principal: ReviewerDep,
    served: PanelsDep,
    queue: ReviewQueueDep,
    settings: SettingsDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
    n: Annotated[int, Query()] = 1,
    annotator: Annotated[str | None, Query()] = None,
    x_annotator: Annotated[str | None, Header()] = None,
) -> ReviewNextOut:
    """Lease up to ``n`` pending items of the panel's queue to one annotator, in random order
    (two annotators never hold the same item; an expired lease returns the item). An annotator
    credential leases as itself, within its panels (403 otherwise); what one annotator and one
    tenant key hold is capped (409, ``review_max_held_per_annotator`` / ``_per_caller``)."""
    limit = settings.review.review_max_lease
    if not 1 <= n <= limit:
        raise FieldProblem("query.n", f"must be between 1 and {limit}")
    runtime = served.runtime(panel, field="query.panel")
    principal.check_panel(runtime.name)
    who = _who(principal, annotator, x_annotator, field="query.annotator")
    leases = await queue.lease(principal.tenant, runtime.name, n=n, annotator=who,
                               caller=_caller(principal))
    return ReviewNextOut(panel=runtime.name, annotator=who,
                         items=[item_out(lease, runtime) for lease in leases])


@router.post("/skip")
async def skip(
    body: ReviewSkipRequest,
    principal: ReviewerDep,
    queue: ReviewQueueDep,
    x_annotator: Annotated[str | None, Header()] = None,
) -> ReviewSkipOut:
    """Give a leased item back to the queue (at its random rank). 404 when this annotator
    holds no live lease on it."""
    tenant = principal.tenant
    check_verdict_id(tenant, body.verdict_id)
    who = _who(principal, body.annotator, x_annotator, field="body.annotator")
    released = await queue.release(tenant, body.verdict_id, who, _caller(principal))
    if not released:
        raise NotFound(f"annotator {who!r} holds no live lease on verdict {body.verdict_id!r}",
                       fields=[("body.verdict_id", "not leased by this annotator")])
    return ReviewSkipOut(verdict_id=body.verdict_id, annotator=who, released=True)


@router.get("/stats")
async def stats(
    tenant: TenantDep,
    served: PanelsDep,
    queue: ReviewQueueDep,
    panel: Annotated[str | None, Query(min_length=1, max_length=256)] = None,
) -> ReviewStatsOut:
    """Per stratum (review, audit, none): verdicts routed, queued, leased, labelled, and the
    labelled share (for ``none``, labels are unsolicited). ``audit_plan``: the audit rate new
    verdicts get (the static ``audit_rate``, or planned from ``label_budget_per_day`` and the
    last day's traffic), the expected half-width it buys and the expected time to detect a
    10-point precision drop (:mod:`judgefuse.service.review.audit_plan`)."""
    return await queue.stats(tenant, served.runtime(panel, field="query.panel"))
