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

Stratum keys (the names the population estimators use, one per sampling design):

* ``review``: verdicts routed to review (N = their count, labels = theirs);
* ``auto@{rate}``: verdicts auto-accepted while the audit rate was ``rate`` (N = all of them,
  audited or not; labels = the audit labels only: a random sample of the stratum);
* ``inline@review`` / ``inline@auto``: verdicts labelled inline, by route (N = their count,
  labels = all of them); ``inline@auto`` is part of what was auto-accepted;
* ``unsolicited``: labels of verdicts that were never queued (kept apart, never in the
  population estimates: nobody chose them at random).

Traffic counters: every stored verdict adds ``n = 1`` to ``{panel}/traffic/{method}/{key}``
and ``{panel}/traffic/*/{key}`` (the panel's total, for per-judge estimates) in the same atomic
step as the insert, with ``key`` = ``review`` or ``auto@{rate}``: storage keeps them per hour,
so N_s of any window is a read of O(hours) counters.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Literal
from urllib.parse import quote

from judgefuse.service.storage import Number, ReviewStamp, VerdictRecord

__all__ = [
    "ALL_METHODS",
    "INLINE_AUTO",
    "INLINE_REVIEW",
    "REVIEW",
    "UNSOLICITED",
    "accepted_stratum",
    "auto_key",
    "label_stratum_key",
    "is_population_stratum",
    "population_stratum_key",
    "rate_of",
    "solicited",
    "stamp_review",
    "traffic_increments",
    "traffic_key",
    "traffic_prefix",
]

REVIEW = "review"
UNSOLICITED = "unsolicited"
INLINE_REVIEW = "inline@review"
INLINE_AUTO = "inline@auto"
ALL_METHODS = "*"
"""The method part of the panel-wide traffic counter."""


def auto_key(rate: float) -> str:
    """The stratum key of verdicts auto-accepted under audit rate ``rate`` (exact repr)."""
    return f"auto@{float(rate)!r}"


def rate_of(key: str) -> float | None:
    """The audit rate of an ``auto@{rate}`` key (None for any other key)."""
    if not key.startswith("auto@"):
        return None
    try:
        return float(key.removeprefix("auto@"))
    except ValueError:
        return None


def stamp_review(
    route: str, code: str | None, audit_rate: float, rng: random.Random, *, inline_label: bool = False
) -> ReviewStamp:
    """The stamp of a verdict routed ``route`` for reason ``code`` (pure but for ``rng``);
    ``inline_label``: the request carried its label (stratum ``inline``)."""
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
    if draw < audit_rate:
        return ReviewStamp(stratum="audit", inclusion_probability=audit_rate, reason="audit",
                           audit_rate=audit_rate, draw=draw, rank=rank, route=routed)
    return ReviewStamp(stratum="none", inclusion_probability=0.0, reason="auto_accept",
                       audit_rate=audit_rate, draw=draw, rank=rank, route=routed)


def population_stratum_key(stamp: ReviewStamp) -> str:
    """The traffic stratum a verdict counts in: ``review``, ``auto@{rate}`` or ``inline@...``."""
    if stamp.stratum == "inline":
        return INLINE_AUTO if stamp.route == "auto_accept" else INLINE_REVIEW
    return REVIEW if stamp.stratum == "review" else auto_key(stamp.audit_rate)


def is_population_stratum(key: str) -> bool:
    """Whether ``key`` names a stratum of the population estimates (not ``unsolicited``)."""
    return key in (REVIEW, INLINE_REVIEW, INLINE_AUTO) or rate_of(key) is not None


def accepted_stratum(key: str) -> bool:
    """Whether the stratum ``key`` holds auto-accepted verdicts (auto-accept precision)."""
    return key == INLINE_AUTO or rate_of(key) is not None


def label_stratum_key(record: VerdictRecord) -> str:
    """The stratum a label of ``record`` feeds: ``review``, ``auto@{rate}`` (an audit label) or
    ``unsolicited``. A record from before the review loop (no stamp) counts as ``review`` when
    it was routed to review, else as ``unsolicited``."""
    stamp = record.review
    if stamp is None:
        return REVIEW if record.verdict.route == "human_review" else UNSOLICITED
    if stamp.stratum == "review":
        return REVIEW
    if stamp.stratum == "audit":
        return auto_key(stamp.audit_rate)
    if stamp.stratum == "inline":
        return population_stratum_key(stamp)
    return UNSOLICITED


def traffic_prefix(panel: str, method: str) -> str:
    """The prefix of (panel, method)'s traffic counters (``method`` ``*``: the whole panel)."""
    return f"{quote(panel, safe='')}/traffic/{quote(method, safe='')}/"


def traffic_key(panel: str, method: str, stratum_key: str) -> str:
    return traffic_prefix(panel, method) + quote(stratum_key, safe="")


def traffic_increments(panel: str, method: str, stamp: ReviewStamp) -> dict[str, Mapping[str, Number]]:
    """What ``save_verdict`` adds for one new verdict: n += 1 in its method's and the panel's
    traffic counter of its stratum."""
    key = population_stratum_key(stamp)
    return {
        traffic_key(panel, method, key): {"n": 1},
        traffic_key(panel, ALL_METHODS, key): {"n": 1},
    }


def solicited(
    strata: Sequence[str], traffic: Mapping[str, int]
) -> tuple[list[int], list[str], dict[str, int]]:
    """What a stratified tuner gets from labelled points with stratum keys ``strata`` and the
    traffic counters ``traffic`` (N_s): the indices of the points it may use (unsolicited
    labels left out: nobody chose them at random), their strata, and N_s with every stratum at
    least as large as its labels (records from before the counters have labels but no count)."""
    keep = [i for i, stratum in enumerate(strata) if stratum != UNSOLICITED]
    kept = [strata[i] for i in keep]
    counts = dict(traffic)
    for stratum in set(kept):
        counts[stratum] = max(counts.get(stratum, 0), kept.count(stratum))
    return keep, kept, counts
