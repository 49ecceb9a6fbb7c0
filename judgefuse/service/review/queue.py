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
"""

from __future__ import annotations

from typing import Any

from judgefuse.service.errors import FieldProblem
from judgefuse.service.judging.panels import PanelRuntime
from judgefuse.service.judging.request_checks import encodable
from judgefuse.service.schemas import ReviewItemOut
from judgefuse.service.storage import ReviewLease

__all__ = ["annotator_name", "item_out", "stats_out"]


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
