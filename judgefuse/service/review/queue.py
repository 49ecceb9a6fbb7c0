"""The review queue as annotators use it: lease, skip, stats (docs/design.md, 'The review loop').

Storage holds the queue (atomic leases, the label ends the lease); this module decides what an
annotator sees and who they are:

* **Random order.** Items are leased lowest stamp ``rank`` first, a uniform draw made when the
  verdict was decided, so whatever part of a stratum gets labelled (annotators rarely finish
  the queue) is a random sample of it: the population estimates weight each stratum's labels
  by N_s / N and need exactly that. "Hardest first" would make the labelled part of a stratum
  its hardest part, and every estimate built on it biased.
* **No anchoring.** An item shows the question and the two answers; the judges' verdict only
  when the panel opts in (``review_shows_verdict``).
* **Who.** The annotator is the ``annotator`` query parameter, else the ``X-Annotator``
  header, else the tenant's name (one shared identity: give each person their own name so
  two people never hold the same item). Leases are per annotator within the tenant.

:class:`ReviewQueue` is the slice's service (the gateway builds it): leases, skips and the
stats with their audit plan, for the HTTP routes and the annotator page alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from judgefuse.service.errors import FieldProblem
from judgefuse.service.judging.panels import PanelRuntime
from judgefuse.service.judging.request_checks import encodable
from judgefuse.service.ledger import label_kind_counts
from judgefuse.service.responses import ReviewStatsOut
from judgefuse.service.review.audit_plan import AuditPlanner, daily_traffic, plan_report
from judgefuse.service.schemas import ReviewItemOut
from judgefuse.service.serving import ServingState
from judgefuse.service.settings import Settings
from judgefuse.service.storage import ReviewLease, Storage, StratumCounts

__all__ = ["ReviewQueue", "annotator_name", "item_out", "stats_out"]


def annotator_name(tenant: str, query: str | None, header: str | None, *, field: str) -> str:
    """The annotator identity (see the module docstring); 422 naming ``field`` if unusable."""
    name = query if query is not None else header
    if name is None:
        return tenant
    name = name.strip()
    if not name or len(name) > 256 or not encodable(name):
        raise FieldProblem(field, "an annotator name is 1-256 characters of text")
    return name


def item_out(lease: ReviewLease, runtime: PanelRuntime | None) -> ReviewItemOut:
    record = lease.record
    item = record.item
    stamp = record.review
    verdict: dict[str, Any] | None = None
    if runtime is not None and runtime.panel.config.review_shows_verdict:
        verdict = {"choice": record.verdict.choice, "confidence": record.verdict.confidence,
                   "method": record.verdict.method}
    return ReviewItemOut(
        verdict_id=record.id,
        question=item.question if item else "",
        answer_a=item.answer_a if item else "",
        answer_b=item.answer_b if item else "",
        reason=stamp.reason if stamp else "review",
        stratum=stamp.stratum if stamp else "review",
        lease_expires_at=lease.lease_expires_at,
        verdict=verdict,
    )


def stats_out(counts: dict[str, Any]) -> dict[str, Any]:
    """Per stratum: routed, queued, leased, labelled and the labelled share of the routed."""
    strata = {}
    for name, c in counts.items():
        strata[name] = {**c.model_dump(),
                        "labelled_share": c.labelled / c.routed if c.routed else None}
    return {
        "strata": strata,
        "queue_depth": sum(c.queued for c in counts.values()),
        "leased": sum(c.leased for c in counts.values()),
    }


class ReviewQueue:
    """One gateway's review queue: storage holds the items and the leases (atomic; a label ends
    a lease, see :mod:`judgefuse.service.review.labels`), this decides the lease time, the clock
    and what the stats report."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        serving: ServingState,
        planner: AuditPlanner,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.serving = serving
        self.planner = planner
        self.clock = clock

    async def lease(self, tenant: str, panel: str, *, n: int, annotator: str) -> list[ReviewLease]:
        """Up to ``n`` pending items of the panel's queue, leased to ``annotator`` for
        ``review_lease_s`` (lowest rank first: random order)."""
        return await self.storage.lease_review(
            tenant, panel, n=n, annotator=annotator, lease_s=self.settings.review.review_lease_s,
            now=self.clock(),
        )

    async def release(self, tenant: str, verdict_id: str, annotator: str) -> bool:
        """Give a leased item back (a skip); False when ``annotator`` holds no live lease on it."""
        return await self.storage.release_review(tenant, verdict_id, annotator, now=self.clock())

    async def counts(self, tenant: str, panel: str) -> dict[str, StratumCounts]:
        """Per stratum: routed, queued, leased, labelled."""
        return await self.storage.review_stats(tenant, panel, now=self.clock())

    async def stats(self, tenant: str, runtime: PanelRuntime) -> ReviewStatsOut:
        """``GET /v1/review/stats``: the counts per stratum and the audit plan (the rate new
        verdicts get, the half-width it buys, the expected time to detect a drop)."""
        config = runtime.panel.config
        counts = await self.counts(tenant, runtime.name)
        planned = await self.planner.rate(tenant, runtime.name, config, self.clock())
        if planned.plan is None and planned.auto_per_day == 0:  # static rate: traffic for the report
            review, auto = await daily_traffic(self.storage, tenant, runtime.name, self.clock())
            planned = replace(planned, review_per_day=review, auto_per_day=auto)
        threshold = await self.serving.threshold(tenant, runtime.name)
        plan = await plan_report(planned, target=threshold.target_precision if threshold else None,
                                 alpha=self.settings.monitoring.monitor_alpha,
                                 budget=config.label_budget_per_day)
        return ReviewStatsOut.model_validate(
            {"panel": runtime.name, "audit_rate": config.audit_rate, **stats_out(counts),
             "audit_plan": plan,
             "label_kinds": await label_kind_counts(self.storage, tenant, runtime.name)}
        )
