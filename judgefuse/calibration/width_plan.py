"""How many audit labels a day an interval of a given width needs (the planner behind
``judgefuse plan`` and ``GET /v1/panels/{panel}/plan``).

The inverse of :func:`.label_budget.expected_half_width`: a gateway routes ``review_per_day``
verdicts to review (labelled by the review itself: a census, no sampling variance) and
auto-accepts ``auto_per_day``, of which a share ``r`` is audited. Over a window of ``days`` the
auto stratum holds ``N = auto_per_day x days`` verdicts and ``n = r N`` audit labels; with a
per-verdict standard deviation ``S`` of correctness the stratified estimate of the auto-accept
precision has variance ``S^2 (1 - r) / (r N)`` (finite-population corrected), and the window's
accuracy ``W^2`` times that (``W``: the auto stratum's share of traffic; review adds nothing).
Setting ``z^2 var = h^2`` for the half-width ``h = width / 2`` gives

    r = 1 / (1 + h^2 N / (z^2 S^2))          (precision; accuracy: h / W in place of h)

which is below 1 for any ``h > 0``: auditing everything gives an exact answer.

Two designs: **uniform** audits use ``S = sqrt(p (1 - p))`` of the stratum's precision ``p``;
**active** audits by confidence band (:mod:`.audit_bands`) the Neyman-allocated spread
``S = sum_h W_h S_h`` over the bands (the band shares ``W_h`` and spreads ``S_h``), which is the
same variance at the rates the bands' plan gives. Normal approximation: a plan, not a bound;
the small-sample guard of the service's intervals adds a little width at a few dozen labels.

:func:`plan_from_traffic` is the one computation behind both front ends, ``judgefuse plan``
(a gateway's export) and ``GET /v1/panels/{panel}/plan`` (the panel's stored verdicts): the
daily volumes from the traffic's span, and :class:`NotEnoughTraffic` instead of a plan made up
from too little of it (fewer than :data:`MIN_AUTO_VERDICTS` auto-accepted verdicts, or traffic
spanning less than :data:`MIN_TRAFFIC_DAYS`: a burst of minutes is no rate per day).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from judgefuse.errors import JudgefuseError

__all__ = [
    "MIN_AUTO_VERDICTS",
    "MIN_TRAFFIC_DAYS",
    "NotEnoughTraffic",
    "WidthPlan",
    "audit_rate_for_width",
    "plan_from_traffic",
    "plan_widths",
]

MIN_AUTO_VERDICTS = 30
"""The fewest auto-accepted verdicts a plan is made from (their confidences set the bands)."""
MIN_TRAFFIC_DAYS = 1.0 / 24.0
"""The shortest span of traffic (first to last verdict) a rate per day is taken from: an hour."""


class NotEnoughTraffic(JudgefuseError, ValueError):
    """Too little traffic to plan from (:func:`plan_from_traffic`); the message says what is missing."""


def audit_rate_for_width(
    width: float, population: float, sd: float, *, share: float = 1.0, level: float = 0.95
) -> float:
    """The audit rate whose stratified interval on a stratum of ``population`` verdicts with
    spread ``sd`` is ``width`` wide (two-sided ``level``), for a mean of which that stratum is
    ``share`` (module docstring). 0 when the spread is 0 or the population empty."""
    if not width > 0:
        raise ValueError(f"width must be > 0, got {width!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    if not 0 < share <= 1:
        raise ValueError(f"share must lie in (0, 1], got {share!r}")
    if population <= 0 or sd <= 0:
        return 0.0
    from scipy.stats import norm  # on first use: every judgefuse command imports this module

    z = float(norm.ppf(0.5 + level / 2.0))
    h = width / 2.0 / share
    return 1.0 / (1.0 + h * h * population / (z * z * sd * sd))


@dataclass(frozen=True)
class WidthPlan:
    """Audit rates and labels a day for one target ``width`` over a ``days`` window."""

    width: float
    days: float
    review_per_day: float
    auto_per_day: float
    precision: float
    """The auto-accepted verdicts' precision the plan assumes (audit labels, else confidence)."""
    precision_basis: str
    sd_uniform: float
    sd_active: float
    rates: dict[str, float]
    """``{"precision/uniform": r, "precision/active": r, "accuracy/uniform": r, ...}``."""
    traffic_days: float | None = None
    """The span of the traffic the volumes were read from (:func:`plan_from_traffic`)."""

    def labels_per_day(self, key: str) -> float:
        return self.rates[key] * self.auto_per_day

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["labels_per_day"] = {key: self.labels_per_day(key) for key in self.rates}
        return out


def plan_widths(
    auto_confidence: np.ndarray,
    auto_correct: np.ndarray,
    *,
    review_per_day: float,
    auto_per_day: float,
    width: float,
    days: float,
    bands: int = 3,
    level: float = 0.95,
) -> WidthPlan:
    """The plan from a period of traffic: the auto-accepted verdicts' fused confidences and
    their audit labels (1/0, NaN where not audited) set ``p`` and the band spreads; the daily
    volumes and the window set ``N`` and ``W``."""
    from .audit_bands import plan_audit_bands

    c = np.asarray(auto_confidence, dtype=np.float64)
    y = np.asarray(auto_correct, dtype=np.float64)
    if c.size == 0 or c.shape != y.shape:
        raise ValueError("auto_confidence must be non-empty, with a label (or NaN) for each")
    if not (days > 0 and auto_per_day > 0 and review_per_day >= 0):
        raise ValueError("days and auto_per_day must be > 0, review_per_day >= 0")
    labelled = y[np.isfinite(y)]
    if labelled.size:
        p, basis = float(labelled.mean()), f"{labelled.size} audit labels"
    else:
        p, basis = float(c.mean()), "the mean fused confidence (no audit label yet)"
    p = min(max(p, 1e-3), 1.0 - 1e-3)
    sd_uniform = math.sqrt(p * (1.0 - p))
    plan = plan_audit_bands(c, y, mean_rate=0.1, bands=bands)
    which = np.searchsorted(np.asarray(plan.edges), c, side="right")
    sd_active = 0.0
    for h in range(len(plan.rates)):
        members = which == h
        if not members.any():
            continue
        known = y[members][np.isfinite(y[members])]
        mean_c = float(c[members].mean())
        p_h = (float(known.sum()) + 10.0 * mean_c) / (known.size + 10.0)
        p_h = min(max(p_h, 1e-3), 1.0 - 1e-3)
        sd_active += float(members.mean()) * math.sqrt(p_h * (1.0 - p_h))
    population = auto_per_day * days
    share = auto_per_day / (auto_per_day + review_per_day)
    rates = {
        f"{metric}/{design}": audit_rate_for_width(width, population, sd, share=s, level=level)
        for metric, s in (("precision", 1.0), ("accuracy", share))
        for design, sd in (("uniform", sd_uniform), ("active", sd_active))
    }
    return WidthPlan(width, days, review_per_day, auto_per_day, p, basis, sd_uniform, sd_active, rates)


def plan_from_traffic(
    created_at: np.ndarray,
    auto: np.ndarray,
    confidence: np.ndarray,
    correct: np.ndarray,
    *,
    width: float,
    days: float,
    level: float = 0.95,
) -> WidthPlan:
    """The plan from a period of traffic, one entry per verdict: when it was made, whether it
    was auto-accepted, its fused confidence and whether its label found it right (1/0; NaN
    where it has no label that counts: the front end leaves out labels that are no sample of
    the auto-accepted verdicts, such as unsolicited ones). Volumes per day are the counts over
    the span from the first verdict to the last. Raises :class:`NotEnoughTraffic` (module
    docstring) rather than plan from too little."""
    t = np.asarray(created_at, dtype=np.float64)
    is_auto = np.asarray(auto, dtype=bool)
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    if not (t.shape == is_auto.shape == c.shape == y.shape) or t.ndim != 1:
        raise ValueError("created_at, auto, confidence and correct must be 1-d arrays of one length")
    n_auto = int(is_auto.sum())
    if n_auto < MIN_AUTO_VERDICTS:
        raise NotEnoughTraffic(
            f"not enough traffic yet: {n_auto} auto-accepted verdict(s) of {t.size}, a plan needs "
            f"at least {MIN_AUTO_VERDICTS} (nothing is auto-accepted, or audited, until a threshold is tuned)"
        )
    span_days = float(t.max() - t.min()) / 86400.0
    if span_days < MIN_TRAFFIC_DAYS:
        raise NotEnoughTraffic(
            f"not enough traffic yet: {t.size} verdicts over {span_days * 1440:.1f} minutes, a rate "
            f"per day needs traffic spanning at least {MIN_TRAFFIC_DAYS * 24:g} hour"
        )
    plan = plan_widths(
        c[is_auto],
        y[is_auto],
        review_per_day=(t.size - n_auto) / span_days,
        auto_per_day=n_auto / span_days,
        width=width,
        days=days,
        level=level,
    )
    return replace(plan, traffic_days=span_days)
