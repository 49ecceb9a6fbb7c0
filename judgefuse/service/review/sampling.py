"""The review stratum of a verdict, drawn when it is decided (docs/design.md, 'The review loop').

Labels come back for what people review, and people review what the gateway was unsure of: a
sample chosen by the routing itself. To estimate anything about *all* traffic the service
must know, for every verdict, the probability that it could be labelled. So each verdict is
stamped, at decision time and once, with a :class:`ReviewStamp`:

* routed to ``human_review``: stratum ``review``, inclusion probability 1;
* auto-accepted: a uniform draw ``u``; ``u < audit_rate`` puts it in stratum ``audit`` (queued
  too, inclusion probability ``audit_rate``), else stratum ``none`` (not queued, 0);
* a request that carries its label (inline): stratum ``inline`` whatever the route, inclusion
  probability 1, never queued. Its label was chosen by the client before any routing, so these
  verdicts are a census of their own stratum; counting them "unsolicited" would throw away
  every label of a pipeline that labels all its traffic inline.

The audit rate is the panel's at that moment and is stored in the stamp: changing the panel
file later never rewrites a stored probability. Every stamp also draws ``rank``, the queue's
order key, so the queue is served in random order (see :mod:`judgefuse.service.storage.base`).

What a stamp counts toward (its stratum key, the traffic counters it adds to, the stratum
copies its label feeds) is the ledger grammar, :mod:`judgefuse.service.ledger`: this module only
draws the stamp.
"""

from __future__ import annotations

import random
from typing import Literal

from judgefuse.service.storage import ReviewStamp
from judgefuse.service.storage.records import BAND_AUDIT

__all__ = ["stamp_review"]


def stamp_review(
    route: str, code: str | None, audit_rate: float, rng: random.Random, *, inline_label: bool = False,
    band: tuple[float, float] | None = None,
) -> ReviewStamp:
    """The stamp of a verdict routed ``route`` for reason ``code`` (pure but for ``rng``);
    ``inline_label``: the request carried its label (stratum ``inline``). ``band``: (rate,
    floor) of an auto-accepted verdict's confidence band under active audits
    (:mod:`.active_audits`): the rate is its audit rate and inclusion probability, and one draw
    below the floor is an ordinary ``audit``, between floor and rate an ``audit_band`` one."""
    rank = rng.random()
    routed: Literal["auto_accept", "human_review"] = (
        "auto_accept" if route == "auto_accept" else "human_review"
    )
    if inline_label:
        return ReviewStamp(stratum="inline", inclusion_probability=1.0, reason="inline_label",
                           audit_rate=audit_rate, draw=None, rank=rank, route=routed)
    if route != "auto_accept":
        return ReviewStamp(stratum="review", inclusion_probability=1.0, reason=code or "review",
                           audit_rate=audit_rate, draw=None, rank=rank, route=routed)
    draw = rng.random()
    if band is not None:
        rate, floor = band
        if draw < rate:
            return ReviewStamp(stratum="audit", inclusion_probability=rate,
                               reason="audit" if draw < floor else BAND_AUDIT,
                               audit_rate=rate, draw=draw, rank=rank, route=routed)
        return ReviewStamp(stratum="none", inclusion_probability=0.0, reason="auto_accept",
                           audit_rate=rate, draw=draw, rank=rank, route=routed)
    if draw < audit_rate:
        return ReviewStamp(stratum="audit", inclusion_probability=audit_rate, reason="audit",
                           audit_rate=audit_rate, draw=draw, rank=rank, route=routed)
    return ReviewStamp(stratum="none", inclusion_probability=0.0, reason="auto_accept",
                       audit_rate=audit_rate, draw=draw, rank=rank, route=routed)
