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
* **Who.** With an annotator credential, the account's name (nothing else). With a tenant key,
  the ``annotator`` query parameter, else the ``X-Annotator`` header, else the tenant's name
  (one shared identity: give each person their own name so two people never hold the same
  item). Leases are per annotator within the tenant.
* **Holds and caps** (docs/review-loop.md, 'Leases'). What each annotator holds is kept in a
  compare-and-set state blob (``review-holds/...``: id -> panel, expiry), beside storage's own
  lease: a live entry whose verdict is still unlabelled is a live lease of that annotator
  (nobody else can lease an item while its lease lives, and only a label or this module's
  release end it early). So the page shows the item already held, one per annotator and
  panel, instead of leasing another on every reload, second tab or back button; and
  ``GET /v1/review/next`` stops at ``review_max_held_per_annotator`` items per annotator and
  ``review_max_held_per_caller`` per calling tenant key (409 beyond: label, skip or wait).
  Concurrent requests of one annotator may pass a cap by at most their number.

:class:`ReviewQueue` is the slice's service (the gateway builds it): leases, skips and the
stats with their audit plan, for the HTTP routes and the annotator page alike.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from judgefuse.fusion.verdict import is_tie
from judgefuse.service.errors import FieldProblem, ServiceError
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.serving import ServingState
from judgefuse.service.kernel.shared_state import update_state
from judgefuse.service.kernel.stored_text import encodable
from judgefuse.service.ledger import label_kind_counts
from judgefuse.service.responses import ReviewStatsOut
from judgefuse.service.review.audit_plan import AuditPlanner, daily_traffic, plan_report
from judgefuse.service.schemas import ReviewItemOut
from judgefuse.service.settings import Settings
from judgefuse.service.storage import ReviewLease, Storage, StratumCounts

__all__ = ["LeaseCapReached", "ReviewQueue", "annotator_name", "item_out", "stats_out"]


class LeaseCapReached(ServiceError):
    """409: the annotator (or the calling key) already holds as many items as allowed."""

    status = 409


def hold_key(who: str) -> str:
    """The state key of what ``who`` (an annotator name, or ``caller:...``) holds."""
    return "review-holds/" + hashlib.sha256(who.encode("utf-8")).hexdigest()[:40]


Holds = dict[str, list[Any]]  # verdict id -> [panel, lease expiry]
PAGE_TURN_S = 10.0
"""Longest one page load may keep an annotator's other tabs of the panel waiting (if its
replica dies mid-load)."""
PAGE_TURN_WAITS = 250
"""How many 20 ms waits a tab makes for its turn (5 s) before it goes ahead anyway."""


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
                   "method": record.verdict.method, "tie": is_tie(record.verdict)}
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

    async def _lease(self, tenant: str, panel: str, n: int, annotator: str) -> list[ReviewLease]:
        return await self.storage.lease_review(
            tenant, panel, n=n, annotator=annotator, lease_s=self.settings.review.review_lease_s,
            now=self.clock(),
        )

    async def _holds(self, tenant: str, who: str) -> Holds:
        """What ``who`` holds by the hold blob, expired entries left out."""
        blob = await self.storage.get_state(tenant, hold_key(who))
        now = self.clock()
        return {v: e for v, e in (blob.body.get("held", {}) if blob else {}).items() if e[1] > now}

    async def _still_held(self, tenant: str, holds: Holds) -> tuple[Holds, set[str]]:
        """The holds whose verdict is still unlabelled, and the ids that are not (labelled
        or gone): a label ends a lease in storage without passing here."""
        live: Holds = {}
        gone: set[str] = set()
        for vid, entry in holds.items():
            record = await self.storage.get_verdict(tenant, vid)
            if record is None or record.label is not None:
                gone.add(vid)
            else:
                live[vid] = entry
        return live, gone

    async def _note(self, tenant: str, who: str, add: Holds, drop: set[str]) -> None:
        now = self.clock()

        def change(body: dict[str, Any]) -> tuple[dict[str, Any], None]:
            held = {v: e for v, e in body.get("held", {}).items() if e[1] > now and v not in drop}
            return {"held": {**held, **add}}, None

        await update_state(self.storage, tenant, hold_key(who), change)

    async def lease(
        self, tenant: str, panel: str, *, n: int, annotator: str, caller: str | None = None
    ) -> list[ReviewLease]:
        """Up to ``n`` pending items of the panel's queue, leased to ``annotator`` for
        ``review_lease_s`` (lowest rank first: random order), within the caps: what
        ``annotator`` holds plus these at most ``review_max_held_per_annotator``, and what the
        calling tenant key (``caller``, None for an annotator credential) holds at most
        ``review_max_held_per_caller``. 409 (:class:`LeaseCapReached`) when there is no room."""
        review = self.settings.review
        limits = [(annotator, review.review_max_held_per_annotator, "annotator")]
        if caller is not None:
            limits.append((f"caller:{caller}", review.review_max_held_per_caller, "caller"))
        room = n
        for who, cap, kind in limits:
            holds = await self._holds(tenant, who)
            if len(holds) + room > cap:  # labelled items free their place
                holds, gone = await self._still_held(tenant, holds)
                if gone:
                    await self._note(tenant, who, {}, gone)
            room = min(room, cap - len(holds))
            if room <= 0:
                name = annotator if kind == "annotator" else "this API key"
                raise LeaseCapReached(
                    f"{kind} {name!r} already holds {len(holds)} leased items "
                    f"(review_max_held_per_{kind} = {cap}): label or skip them first, or wait for "
                    "their leases to expire", fields=[("query.n", f"{kind} lease cap reached")])
        leases = await self._lease(tenant, panel, room, annotator)
        add = {lease.record.id: [panel, lease.lease_expires_at] for lease in leases}
        for who, _, _ in limits:
            await self._note(tenant, who, add, set())
        return leases

    async def _held_in(
        self, tenant: str, panel: str, annotator: str, skipped: str | None
    ) -> tuple[ReviewLease | None, Holds]:
        """The item ``annotator`` holds in ``panel`` by the hold record (still unlabelled), and
        the record's entries of that panel."""
        holds = {v: e for v, e in (await self._holds(tenant, annotator)).items()
                 if e[0] == panel and v != skipped}
        for vid, (_, expires) in sorted(holds.items(), key=lambda h: h[1][1]):
            record = await self.storage.get_verdict(tenant, vid)
            if record is not None and record.label is None:
                return ReviewLease(record=record, annotator=annotator, lease_expires_at=expires), holds
        return None, holds

    async def held_item(
        self, tenant: str, panel: str, annotator: str, *, skipped: str | None = None
    ) -> ReviewLease | None:
        """The annotator page's item: the one ``annotator`` already holds in ``panel`` (a
        reload, a second tab, the back button), else one newly leased, never two. ``skipped``
        (just given back) is not shown again while another item is free.

        One page load per annotator and panel at a time, across replicas (a named lease in the
        store): tabs opened at the same moment wait for the first one's lease and show it."""
        name = "review-page/" + hashlib.sha256(f"{annotator}\0{panel}".encode()).hexdigest()[:40]
        owner = secrets.token_hex(8)
        for _ in range(PAGE_TURN_WAITS):
            if await self.storage.acquire_lease(tenant, name, owner, ttl_s=PAGE_TURN_S):
                break
            await asyncio.sleep(0.02)
        try:
            return await self._held_or_leased(tenant, panel, annotator, skipped)
        finally:
            await self.storage.release_lease(tenant, name, owner)

    async def _held_or_leased(
        self, tenant: str, panel: str, annotator: str, skipped: str | None
    ) -> ReviewLease | None:
        held, holds = await self._held_in(tenant, panel, annotator, skipped)
        if held is not None:
            return held
        if holds:
            await self._note(tenant, annotator, {}, set(holds))
        leases = await self._lease(tenant, panel, 1, annotator)
        if leases and skipped and leases[0].record.id == skipped:
            # the item just skipped is back at its rank (the lowest): show the next one, if
            # any, and give the skipped one back again
            more = await self._lease(tenant, panel, 1, annotator)
            if more:
                await self.storage.release_review(tenant, skipped, annotator, now=self.clock())
                leases = more
        if not leases:  # the queue is empty, or another tab took the last free item just now
            return (await self._held_in(tenant, panel, annotator, skipped))[0]
        mine = leases[0]
        now = self.clock()

        def change(body: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
            held = {v: e for v, e in body.get("held", {}).items() if e[1] > now}
            other = next((v for v, e in held.items() if e[0] == panel and v != mine.record.id
                          and v not in holds and v != skipped), None)
            if other is not None:  # another tab of this annotator got there first
                return None, other
            held[mine.record.id] = [panel, mine.lease_expires_at]
            return {"held": held}, None

        other = await update_state(self.storage, tenant, hold_key(annotator), change)
        if other is None:
            return mine
        await self.storage.release_review(tenant, mine.record.id, annotator, now=now)
        return await self._held_or_leased(tenant, panel, annotator, skipped)

    async def release(
        self, tenant: str, verdict_id: str, annotator: str, caller: str | None = None
    ) -> bool:
        """Give a leased item back (a skip); False when ``annotator`` holds no live lease on it."""
        released = await self.storage.release_review(tenant, verdict_id, annotator, now=self.clock())
        for who in (annotator, *((f"caller:{caller}",) if caller is not None else ())):
            await self._note(tenant, who, {}, {verdict_id})
        return released

    async def hold(
        self, tenant: str, panel: str, annotator: str, verdict_id: str, expires_at: float
    ) -> None:
        """Note that ``annotator`` holds ``verdict_id`` (leased by storage outside
        :meth:`lease`: the item of an undone label), so :meth:`held_item` shows it next."""
        await self._note(tenant, annotator, {verdict_id: [panel, expires_at]}, set())

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
