"""How many auto-accepted verdicts to audit: spending a daily label budget (docs/design.md, 'The review loop').

Two strata get labels: ``review`` (verdicts routed to human review) and ``audit`` (auto-accepted
verdicts drawn with probability ``r``). **What is actually free to choose.** A verdict routed to
review is looked at by a person anyway, because that is what review means; the person's decision
is its label. So review labels are not an option bought from the budget, they are a fixed cost
paid first, and they already make the review stratum a census (inclusion probability 1, so it
adds no sampling variance to a population estimate). The only free choice is ``r``.

For a population mean (accuracy, Brier, precision of what was accepted) estimated with the
stratified estimator, the variance is ``sum_h W_h^2 S_h^2 / n_h * (1 - n_h / N_h)`` (``W_h`` the
stratum's traffic share, ``S_h`` its per-item standard deviation, ``n_h`` labels of ``N_h``).
Neyman allocation minimises it for a given total: ``n_h`` proportional to ``N_h S_h``, capped at
``N_h`` with the rest given to the other strata. With the review stratum forced to a census the
Neyman answer is simply "every label left after review goes to the audit stratum", i.e.
``r = (budget - review) / auto`` (clipped to ``[min_rate, max_rate]``): :func:`plan_audit_rate`.
If review decisions are *not* usable as labels (``review_labelled=False``: say reviewers only
escalate, and labels are bought separately for both strata), both strata are sampled and the
capped Neyman split is used.

:func:`expected_half_width` gives the confidence-interval half-width this buys (normal
approximation, which is what a plan needs; the service reports exact or time-uniform bounds), and
:func:`expected_detection_delay` how long the :class:`~.sequential.PrecisionMonitor` takes to see a
drop at that rate, from the monitor's own boundary (the shared e-value and thresholds) along the
expected path of the labels; ``benchmarks/bench_drift.py`` prints it next to the simulated median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from .mixture_bound import check_prior, log_evalue_below
from .restarts import DEFAULT_MIN_LEVEL, SLOTS, check_min_level, log_threshold
from .sequential import check_alpha, check_mean, precision_alarm_times, precision_prior

__all__ = [
    "AuditPlan",
    "DetectionDelay",
    "HalfWidths",
    "expected_detection_delay",
    "expected_half_width",
    "plan_audit_rate",
]


def _positive(value: Any, name: str, *, allow_zero: bool = True) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) < 0 or (
        not allow_zero and float(value) == 0
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")
    return float(value)


def _rate(value: Any, name: str) -> float:
    v = _positive(value, name)
    if v > 1:
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")
    return v


@dataclass(frozen=True)
class AuditPlan:
    """Daily labelling plan. ``binding`` says what limited ``audit_rate``: "budget",
    "max_rate", "min_rate" (the floor costs more than the budget left) or "review_over_budget"
    (the review load alone exceeds the budget: audit at ``min_rate`` and say so)."""

    audit_rate: float
    review_rate: float
    audit_labels_per_day: float
    review_labels_per_day: float
    labels_per_day: float
    binding: str
    method: str


def plan_audit_rate(
    budget_per_day: float,
    review_per_day: float,
    auto_per_day: float,
    *,
    sd_review: float = 0.5,
    sd_auto: float = 0.3,
    review_labelled: bool = True,
    min_rate: float = 0.0,
    max_rate: float = 1.0,
) -> AuditPlan:
    """The audit rate that spends ``budget_per_day`` labels where they tighten population bounds most.

    ``sd_*``: per-item standard deviation of the metric in each stratum (for 0/1 correctness
    ``sqrt(p (1 - p))``: ~0.5 in review, ~0.3 for auto-accepted at precision 0.9). They only
    matter when ``review_labelled`` is False (see the module docstring for why).
    ``min_rate``/``max_rate`` bound the audit rate (e.g. the 2-10% the product allows; a floor
    keeps the precision monitor fed even when the budget is short).
    """
    budget = _positive(budget_per_day, "budget_per_day")
    review = _positive(review_per_day, "review_per_day")
    auto = _positive(auto_per_day, "auto_per_day", allow_zero=False)
    s_rev, s_auto = _positive(sd_review, "sd_review"), _positive(sd_auto, "sd_auto")
    lo, hi = _rate(min_rate, "min_rate"), _rate(max_rate, "max_rate")
    if lo > hi:
        raise ValueError(f"min_rate ({lo}) must not exceed max_rate ({hi})")

    if review_labelled:
        left = budget - review
        wanted = left / auto
        review_rate, method = 1.0, "review census, remaining budget to audit (capped Neyman)"
    else:
        # capped Neyman: n_h proportional to N_h S_h, no stratum above its size
        n_rev, wanted_audit = _capped_neyman(budget, (review, auto), (s_rev, s_auto))
        review_rate = n_rev / review if review > 0 else 0.0
        wanted = wanted_audit / auto
        left = budget - n_rev
        method = "capped Neyman allocation over both strata"
    if review_labelled and left < 0:
        rate, binding = lo, "review_over_budget"
    elif wanted > hi:
        rate, binding = hi, "max_rate"
    elif wanted < lo:
        rate, binding = lo, "min_rate"
    else:
        rate, binding = wanted, "budget"
    if not review_labelled and binding in ("max_rate", "min_rate"):
        # the audit rate hit a bound: the review stratum takes (or gives) the difference, so
        # the day's labels still match the budget where the review stratum allows
        n_rev_adjusted = min(review, max(0.0, budget - rate * auto))
        review_rate = n_rev_adjusted / review if review > 0 else 0.0
    n_review = review * review_rate
    return AuditPlan(audit_rate=rate, review_rate=review_rate, audit_labels_per_day=rate * auto,
                     review_labels_per_day=n_review, labels_per_day=n_review + rate * auto,
                     binding=binding, method=method)


def _capped_neyman(total: float, sizes: tuple[float, ...], sds: tuple[float, ...]):
    sizes_arr, sds_arr = np.asarray(sizes, float), np.asarray(sds, float)
    alloc = np.zeros_like(sizes_arr)
    free = np.ones(sizes_arr.size, dtype=bool)
    left = min(total, sizes_arr.sum())
    while free.any() and left > 0:
        weight = sizes_arr * sds_arr * free
        if weight.sum() == 0:  # no spread anywhere left: spread by size
            weight = sizes_arr * free
        share = left * weight / weight.sum()
        over = free & (alloc + share >= sizes_arr)
        if not over.any():
            alloc += share
            break
        left -= float((sizes_arr - alloc)[over].sum())
        alloc[over] = sizes_arr[over]
        free &= ~over
    return tuple(float(a) for a in alloc)


class HalfWidths(tuple):
    """``(population, auto_accept)`` half-widths (a plain tuple with names)."""

    __slots__ = ()

    def __new__(cls, population: float, auto_accept: float) -> HalfWidths:
        return super().__new__(cls, (population, auto_accept))

    @property
    def population(self) -> float:
        return self[0]

    @property
    def auto_accept(self) -> float:
        return self[1]


def expected_half_width(
    review_per_day: float,
    auto_per_day: float,
    audit_rate: float,
    *,
    sd_review: float = 0.5,
    sd_auto: float = 0.3,
    review_rate: float = 1.0,
    days: float = 1.0,
    confidence: float = 0.95,
) -> HalfWidths:
    """Expected two-sided half-widths after ``days`` of traffic: of the population mean
    (stratified, finite-population corrected) and of the auto-accept precision (audit only).

    Normal approximation ``z * sqrt(var)``; ``inf`` where a stratum with traffic has no labels.
    """
    review = _positive(review_per_day, "review_per_day")
    auto = _positive(auto_per_day, "auto_per_day", allow_zero=False)
    r, q = _rate(audit_rate, "audit_rate"), _rate(review_rate, "review_rate")
    s_rev, s_auto = _positive(sd_review, "sd_review"), _positive(sd_auto, "sd_auto")
    d = _positive(days, "days", allow_zero=False)
    level = _rate(confidence, "confidence")
    if not 0 < level < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    z = float(norm.ppf(0.5 + level / 2))

    def stratum_var(size: float, rate: float, sd: float) -> float:
        if size == 0 or rate == 1.0:
            return 0.0
        n = size * rate
        return math.inf if n == 0 else sd**2 / n * (1 - rate)

    n_total = (review + auto) * d
    var_pop = ((review * d / n_total) ** 2 * stratum_var(review * d, q, s_rev)
               + (auto * d / n_total) ** 2 * stratum_var(auto * d, r, s_auto))
    var_auto = stratum_var(auto * d, r, s_auto)
    return HalfWidths(z * math.sqrt(var_pop), z * math.sqrt(var_auto))


@dataclass(frozen=True)
class DetectionDelay:
    """Delay of the precision monitor after a drop, in audit labels, verdicts and days.

    ``method``: "simulate" (median over seeded simulated streams; ``detected`` is the share
    caught within the simulated horizon) or "path" (the boundary along the expected label
    path; ``window_level``/``window_start`` name the window that crosses first).
    """

    labels: float
    verdicts: float
    days: float
    method: str
    detected: float = math.nan
    window_level: int = -1
    window_start: int = -1


def expected_detection_delay(
    audit_rate: float,
    auto_per_day: float,
    *,
    target: float,
    precision_before: float = 0.90,
    drop: float = 0.10,
    change_after_labels: int = 500,
    alpha: float = 0.05,
    prior: tuple[float, float] | None = None,
    min_level: int = DEFAULT_MIN_LEVEL,
    method: str = "simulate",
    streams: int = 200,
    seed: int = 0,
    horizon_labels: int = 200_000,
) -> DetectionDelay:
    """Labels (and verdicts, days) until :class:`~.sequential.PrecisionMonitor` alarms after the
    precision falls from ``precision_before`` by ``drop``, ``change_after_labels`` audit labels
    after tuning.

    ``method="path"`` computes it from the monitor's boundary: every restart window (level
    ``k``, start ``s``) is followed along the expected path (``p0`` per label before the change,
    ``p1`` after) and the delay is the first label count at which one of them reaches its
    threshold while still live (``t < s + SLOTS * 2^k``). Deterministic and fast, but it ignores that
    with random labels *some* window crosses early: it overstated the simulated median by up to ~40% in
    ``benchmarks/bench_drift.py``. ``method="simulate"`` (default) runs the very monitor
    (:func:`~.sequential.precision_alarm_times`) on ``streams`` seeded streams with the change
    at ``change_after_labels`` for up to 3x the path delay after it, and returns the median
    delay (a second or two). ``inf`` when ``p1 >= target`` (nothing to detect) or when nothing
    (or, simulating, under half the streams) crosses in time.
    """
    r = _rate(audit_rate, "audit_rate")
    if r == 0:
        raise ValueError("audit_rate must be > 0: without audit labels nothing is detected")
    auto = _positive(auto_per_day, "auto_per_day", allow_zero=False)
    target, p0 = check_mean(target, "target"), check_mean(precision_before, "precision_before")
    p1 = p0 - _positive(drop, "drop")
    alpha, min_level = check_alpha(alpha), check_min_level(min_level)
    prior = precision_prior(target) if prior is None else check_prior(prior)
    if isinstance(change_after_labels, bool) or not isinstance(
            change_after_labels, (int, np.integer)) or change_after_labels < 0:
        raise ValueError(f"change_after_labels must be an integer >= 0, got {change_after_labels!r}")
    if method not in ("simulate", "path"):
        raise ValueError(f"method must be 'simulate' or 'path', got {method!r}")
    t0 = int(change_after_labels)
    if p1 >= target:
        return DetectionDelay(math.inf, math.inf, math.inf, method, 0.0)
    p1 = max(p1, 0.0)
    level, start, labels = _path_delay(t0, p0, p1, target, alpha, prior, min_level, horizon_labels)
    if method == "simulate" and math.isfinite(labels):
        horizon = int(3 * labels) + 64
        rng = np.random.default_rng(seed)
        p = np.where(np.arange(t0 + horizon) < t0, p0, p1)
        x = rng.uniform(size=(int(streams), p.size)) < p
        alarms = precision_alarm_times(x, target, alpha=alpha, prior=prior, min_level=min_level)
        hit = alarms > t0
        delays = np.where(hit, alarms - t0, np.inf)
        labels = float(np.median(delays))
        return DetectionDelay(labels, labels / r, labels / (r * auto), method, float(hit.mean()))
    return DetectionDelay(labels, labels / r, labels / (r * auto), method,
                          window_level=level, window_start=start)


def _path_delay(t0: int, p0: float, p1: float, target: float, alpha: float,
                prior: tuple[float, float], min_level: int, horizon_labels: int):
    """(level, start, delay) of the first window to cross along the expected path."""
    best = (math.inf, -1, -1)
    level = min_level
    while (1 << level) <= 2 * horizon_labels:
        size = 1 << level
        first = max(0, t0 // size - (SLOTS - 1))
        for start in range(first * size, (t0 // size + 2) * size, size):
            t = np.arange(max(start + 1, t0 + 1),
                          min(start + SLOTS * size, t0 + horizon_labels + 1))
            if t.size == 0:
                continue
            good = max(0, t0 - start)  # labels of the window before the change
            sums = good * p0 + (t - start - good) * p1
            crossed = log_evalue_below(sums, t - start, target, prior=prior) >= log_threshold(
                alpha, level, start, min_level)
            if crossed.any():
                delay = float(t[np.argmax(crossed)] - t0)
                if delay < best[0]:
                    best = (delay, level, start)
        level += 1
    return best[1], best[2], best[0]
