"""Auto-accept threshold with a precision guarantee (docs/design.md, 'Routing and threshold tuning').

A verdict is auto-accepted when its confidence is ``>= tau`` and sent to human review otherwise.
:func:`tune_threshold` picks, from labelled calibration data, the smallest ``tau`` such that

    P( precision of the auto-accepted set >= target ) >= 1 - delta

(precision = share of accepted verdicts that are correct). How:

* **Per-threshold test.** For candidate ``tau`` let ``n`` be the number of calibration items
  with ``c >= tau`` and ``k`` the correct ones among them. The one-sided exact binomial
  (Clopper-Pearson) lower confidence bound ``L = Beta.ppf(delta; k, n - k + 1)`` (0 when
  ``k = 0``) satisfies ``P(L >= p) <= delta`` for any true precision ``p``. ``tau`` *passes*
  when ``L >= target``.
* **Fixed-sequence testing.** Candidates are tested from HIGH to LOW and the scan STOPS at the
  first candidate that fails; the answer is the last candidate that passed. One ``delta``
  covers the whole scan without a union bound: a wrong answer (true precision < target) means
  the scan passed *the first candidate whose null hypothesis "precision < target" is true*,
  and that single test errs with probability <= delta. A lower threshold that would pass
  again after a failure is never chosen (that would be a multiple-testing leak).
* **Candidates.** By default the distinct confidence values, descending. Scanning every
  distinct value is equivalent to scanning every real ``tau`` (the accepted set only changes
  at observed values), so the argument above applies to the population's first failing
  threshold exactly. With more than ``max_candidates`` distinct values (default 200) they are
  thinned to that many empirical quantiles (each an observed value); testing a subsequence
  of a fixed sequence keeps the guarantee and only costs resolution.
* **Small accepted sets (``min_count``).** A candidate accepting fewer than ``min_count``
  items is *skipped*: it neither passes nor stops the scan, and is never chosen. Because the
  accepted count only grows as ``tau`` falls, the skipped candidates are always a prefix of
  the scan, so skipping means *the scan starts at the highest candidate accepting at least
  ``min_count`` items*. Why the guarantee survives: which candidates are skipped (and the
  candidate list itself) depends on the confidences only, never on the labels. Conditional
  on the confidences the tested candidates are therefore a fixed sequence, and fixed-sequence
  testing holds conditionally for the accepted sets' precision; averaging over the
  confidences gives the unconditional statement. (Strictly, conditional on the confidences
  ``k`` is Poisson-binomial rather than binomial; by Hoeffding (1956, Thm. 4) its upper tail
  is no heavier than that of the binomial with the same mean at cut-offs at least one above
  that mean. The pass cut-off exceeds ``n * target`` by about ``z_(1-delta) * sqrt(n target
  (1 - target))``, which is >= 1 unless ``n target (1 - target)`` is below ~0.6, e.g. target
  0.99 with fewer than ~60 accepted items at delta 0.1: there the conditional argument is
  only approximate.) What skipping does *not* do is vouch for the very top
  (``c`` above the start): a handful of confident errors there is invisible to any test with
  fewer than ``min_count`` items and is simply folded into the first tested set, whose bound
  accounts for it. The alternative, letting a small set stop the scan, would stop every scan
  at its first (always tiny) candidate and never accept anything. The seeded simulation in
  ``tests/calibration/test_thresholds.py`` checks the realised violation rate against
  ``delta`` on a process whose top tail is deliberately bad.

The report also gives what an operator needs: coverage (share auto-accepted), review load
(share sent to review), empirical precision and its lower bound, expected errors among the
accepted, and the scanned path. No qualifying threshold -> ``threshold is None`` ("route
everything to review") with the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from .validation import check_pair

__all__ = ["MARGIN_MISSES", "MarginMisses", "ScanStep", "ThresholdReport", "clopper_pearson_lower",
           "clopper_pearson_upper", "margin_misses", "tune_threshold"]

DEFAULT_MAX_CANDIDATES = 200


class MarginMisses(NamedTuple):
    """How often simulated certificates whose margin fell in ``[low, high)`` missed their target."""

    low: float
    high: float
    certified: int
    missed: int

    @property
    def rate(self) -> float:
        return self.missed / self.certified

    def describe(self) -> str:
        """The band and its count in words: "... with a margin under 1 point missed ... 17 of 1,730 ..."."""
        if self.low <= 0:
            band = f"under {100 * self.high:g} point{'s' if self.high != 0.01 else ''}"
        elif math.isinf(self.high):
            band = f"of {100 * self.low:g} points or more"
        else:
            band = f"of {100 * self.low:g} to {100 * self.high:g} points"
        missed = (f"{self.missed:,} of {self.certified:,} simulated tunes ({100 * self.rate:.1f}%)" if self.missed
                  else f"none of {self.certified:,} simulated tunes")
        return f"certified thresholds with a margin {band} missed their target in {missed}"


MARGIN_MISSES: tuple[MarginMisses, ...] = (
    MarginMisses(-math.inf, 0.01, 1730, 17),
    MarginMisses(0.01, 0.02, 768, 3),
    MarginMisses(0.02, math.inf, 937, 0),
)
"""Certified thresholds and those whose realised precision missed the target, by margin (lower
bound minus target), over 500 simulated streams x 3 tunes of three pools at delta 0.1, as
committed in ``benchmarks/results/certificate_margin.txt`` (``bench_certificate_margin.py``; its
bands from 2 points up are merged here: none of their 937 missed)."""


def margin_misses(margin: float) -> MarginMisses | None:
    """The simulated miss count of certificates with about this ``margin`` (None: NaN, no certificate)."""
    if math.isnan(margin):
        return None
    return next(band for band in MARGIN_MISSES if band.low <= margin < band.high)


class ScanStep(NamedTuple):
    """One tested candidate: threshold, accepted count, empirical precision, lower bound."""

    tau: float
    n_accepted: int
    precision: float
    lower_bound: float


@dataclass(frozen=True)
class ThresholdReport:
    """Result of :func:`tune_threshold`.

    ``threshold`` is ``None`` when no candidate qualifies (route everything to review; see
    ``reason``). Then ``n_accepted`` is 0, ``coverage`` 0, ``review_load`` 1, and
    ``precision``/``lower_bound`` are NaN. ``path`` lists the tested candidates in scan order
    (high to low), ending with the failing one when the scan stopped on a failure.
    """

    threshold: float | None
    target: float
    delta: float
    n: int
    n_accepted: int
    coverage: float
    precision: float
    lower_bound: float
    expected_errors: float
    review_load: float
    min_count: int
    n_candidates: int
    n_skipped: int
    reason: str
    path: list[ScanStep] = field(default_factory=list)

    @property
    def qualified(self) -> bool:
        return self.threshold is not None

    @property
    def margin(self) -> float:
        """How far the certified threshold's lower bound clears the target (NaN without one).
        The guarantee holds over tunes whatever the margin, but a thin one certifies thresholds
        that miss far more often than a wide one (``benchmarks/bench_certificate_margin.py``)."""
        return self.lower_bound - self.target if self.threshold is not None else math.nan

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN -> None)."""

        def clean(v: Any) -> Any:
            return None if isinstance(v, float) and math.isnan(v) else v

        out = {k: clean(getattr(self, k)) for k in (
            "threshold", "target", "delta", "n", "n_accepted", "coverage", "precision",
            "lower_bound", "expected_errors", "review_load", "min_count", "n_candidates",
            "n_skipped", "reason", "margin")}
        out["path"] = [
            {"tau": s.tau, "n_accepted": s.n_accepted, "precision": s.precision,
             "lower_bound": s.lower_bound}
            for s in self.path
        ]
        return out


def clopper_pearson_upper(k: Any, n: Any, alpha: Any) -> np.ndarray:
    """One-sided exact upper confidence bound for a binomial proportion, level ``1 - alpha``.

    ``Beta.ppf(1 - alpha; k + 1, n - k)``, and 1 where ``k == n`` or ``n == 0``; ``k``, ``n``
    and ``alpha`` broadcast. ``betaincinv`` directly (what ``scipy.stats.beta.ppf`` computes,
    without its per-call argument checks, which were most of a tune's time).
    """
    k, n, level = np.broadcast_arrays(np.asarray(k, dtype=np.float64),
                                      np.asarray(n, dtype=np.float64),
                                      np.asarray(alpha, dtype=np.float64))
    ok = (k < n) & (n > 0)
    from scipy.special import betaincinv  # imported on first use: the command line starts faster

    with np.errstate(invalid="ignore", divide="ignore"):
        inner = betaincinv(np.where(ok, k + 1.0, 1.0), np.where(ok, n - k, 1.0), 1.0 - level)
    return np.where(ok, inner, 1.0)


def clopper_pearson_lower(k: Any, n: Any, delta: float) -> np.ndarray:
    """One-sided exact lower confidence bound for a binomial proportion, level ``1 - delta``.

    ``Beta.ppf(delta; k, n - k + 1)``, and 0 where ``k == 0``. ``k``/``n`` broadcast; n >= 1.
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    out = np.zeros(np.broadcast(k, n).shape)
    pos = np.broadcast_to(k > 0, out.shape)
    kb, nb = np.broadcast_to(k, out.shape), np.broadcast_to(n, out.shape)
    from scipy.stats import beta  # scipy.stats costs about a second to import: on first use

    out[pos] = beta.ppf(delta, kb[pos], nb[pos] - kb[pos] + 1.0)
    return out


def check_unit_open(name: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0.0 < v < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def threshold_candidates(c_desc: np.ndarray, candidates: Any, max_candidates: int | None) -> np.ndarray:
    """Candidate thresholds, distinct, descending."""
    if candidates is not None:
        cand = np.asarray(candidates, dtype=np.float64).ravel()
        if cand.size == 0:
            raise ValueError("candidates is empty")
        if np.isnan(cand).any() or (cand < 0.0).any() or (cand > 1.0).any():
            raise ValueError("candidates must be thresholds in [0, 1]")
        return np.unique(cand)[::-1]
    distinct = np.unique(c_desc)[::-1]
    if max_candidates is None or distinct.size <= max_candidates:
        return distinct
    # thin to empirical quantiles; 'inverted_cdf' returns observed values
    levels = np.linspace(0.0, 1.0, max_candidates)
    return np.unique(np.quantile(c_desc, levels, method="inverted_cdf"))[::-1]


def first_reachable(tested: np.ndarray, perfect_lower: np.ndarray, target: float) -> int:
    """Index of the first tested candidate whose bound with zero errors reaches ``target``
    (``len`` when none does): where a fixed-sequence scan can start without wasting its one
    failure on a set too small to ever pass."""
    reachable = np.flatnonzero(tested & (perfect_lower >= target))
    return int(reachable[0]) if reachable.size else tested.size


DEFAULT_CHAINS = 4
"""Starts of :func:`~.stratified_tuning.tune_threshold_stratified`'s scan, each with its share of
``delta`` (:func:`chain_starts`, :func:`chain_levels`, :func:`fallback_scan`)."""


def chain_starts(n_acc: np.ndarray, tested: np.ndarray, min_count: int, chains: int) -> np.ndarray:
    """Where the scan's shares of delta sit: the first tested candidate accepting at least
    ``min_count * 2**k`` labelled items, for ``k < chains`` (distinct, ascending).

    Why several: one fixed sequence that starts at the first set of ``min_count`` items stops
    for good when that small set happens to hold a few errors (at precision 0.92, three or more
    errors among 30 items is a 43% event), although every larger set would pass. With shares of
    delta at later starts too, :func:`fallback_scan` resumes there. The starts depend on the
    accepted counts only (confidences, never labels), so the scan stays a fixed sequence
    conditional on the confidences, as in :func:`tune_threshold`.
    """
    if not tested.any():
        return np.zeros(0, dtype=np.intp)
    most = int(n_acc[tested].max())
    starts = [int(np.argmax(tested & (n_acc >= min_count * 2**k)))
              for k in range(chains) if min_count * 2**k <= most]
    return np.unique(np.asarray(starts, dtype=np.intp))


FIRST_SHARE = 0.7
"""The first start's share of delta when there are several (:func:`chain_levels`)."""


def chain_levels(delta: float, scans: int) -> list[float]:
    """Each start's share of ``delta``: all of it for one start; otherwise :data:`FIRST_SHARE`
    for the first (the classic start, where the usual answer comes from) and the rest split
    evenly among the others. Shares summing to ``delta`` is all :func:`fallback_scan` needs."""
    if scans <= 1:
        return [delta] * scans
    first = delta * FIRST_SHARE
    return [first] + [(delta - first) / (scans - 1)] * (scans - 1)


def fallback_scan(tested: np.ndarray, alpha_at: np.ndarray, lower_at: Callable[[float], np.ndarray],
                  target: float) -> tuple[int | None, list[tuple[int, float]]]:
    """The fallback procedure (Wiens 2003) over the candidates, high to low.

    Candidate ``i`` is tested at level ``alpha_at[i]`` plus the previous tested candidate's level
    when that one passed (a pass hands its level on; a failure loses it), and not at all while
    that level is 0. With all of delta at the first candidate this is plain fixed-sequence
    testing (stop at the first failure). It is a shortcut of closed testing with weighted
    Bonferroni tests, so the chance that any candidate whose precision is below the target
    passes is at most ``sum(alpha_at)`` whatever the dependence between the tests (Wiens &
    Dmitrienko 2005); the answer, the lowest candidate passed, inherits that. ``lower_at(level)``
    gives every candidate's lower bound at that level. Returns the answer's index (or ``None``)
    and the tested ``(index, lower bound)`` in scan order.
    """
    best: int | None = None
    steps: list[tuple[int, float]] = []
    level, passed = 0.0, False
    for i in np.flatnonzero(tested).tolist():
        level = float(alpha_at[i]) + (level if passed else 0.0)
        if level <= 0.0:
            passed = False
            continue
        bound = float(lower_at(level)[i])
        steps.append((i, bound))
        passed = bound >= target
        if passed:
            best = i
    return best, steps


def scan_from_starts(
    n_acc: np.ndarray, errors: np.ndarray, bound_at: Callable[[np.ndarray, np.ndarray, float], np.ndarray],
    *, min_count: int, chains: int, delta: float, target: float,
) -> tuple[int | None, list[tuple[int, float]], np.ndarray]:
    """The stratified tuners' scan: shares of ``delta`` at label-free starts, then :func:`fallback_scan`.

    ``n_acc``: labelled items each candidate (high to low) accepts; ``errors``: per candidate
    the error counts ``bound_at`` reads (any trailing shape); ``bound_at(rows, errors[rows],
    level)`` gives the lower bounds of the candidates in the mask ``rows``. Each start
    (:func:`chain_starts`, :func:`chain_levels`) moves down to the first candidate whose bound
    with no error at all could reach ``target`` (:func:`first_reachable`), so no share is spent
    on a set too small to pass: counts and confidences only, never labels. Returns the answer's
    index (or ``None``), the tested ``(index, lower bound)`` steps and the mask of candidates
    the scan could test.
    """
    size = n_acc.size
    eligible = n_acc >= min_count
    starts = chain_starts(n_acc, eligible, min_count, chains)
    alpha_at = np.zeros(size)
    for start, share in zip(starts.tolist(), chain_levels(delta, starts.size), strict=True):
        from_here = eligible & (np.arange(size) >= start)
        perfect = np.full(size, -np.inf)
        perfect[from_here] = bound_at(from_here, np.zeros_like(errors[from_here]), share)
        at = first_reachable(from_here, perfect, target)
        if at < size:
            alpha_at[at] += share
    first = int(np.argmax(alpha_at > 0)) if alpha_at.any() else size
    tested = eligible & (np.arange(size) >= first)
    cache: dict[float, np.ndarray] = {}

    def lower_at(level: float) -> np.ndarray:
        if level not in cache:
            cache[level] = np.full(size, np.nan)
            cache[level][tested] = bound_at(tested, errors[tested], level)
        return cache[level]

    best, steps = fallback_scan(tested, alpha_at, lower_at, target)
    return best, steps, tested


def tune_threshold(
    confidence: Any,
    correct: Any,
    *,
    target_precision: float,
    delta: float = 0.1,
    min_count: int = 30,
    candidates: Sequence[float] | None = None,
    max_candidates: int | None = DEFAULT_MAX_CANDIDATES,
) -> ThresholdReport:
    """Smallest ``tau`` (accept iff ``confidence >= tau``) with precision >= target w.p. >= 1-delta.

    ``confidence``/``correct``: shape (n,), the calibration set (labelled verdicts).
    ``target_precision`` and ``delta`` in (0, 1). ``min_count`` >= 1: candidates accepting
    fewer items are skipped (see the module docstring for why the guarantee holds).
    ``candidates``: explicit thresholds (any order); default the distinct confidences,
    thinned to ``max_candidates`` quantiles when there are more (``None``: never thin).
    Raises ``ValueError`` on invalid input.
    """
    target = check_unit_open("target_precision", target_precision)
    delta = check_unit_open("delta", delta)
    if isinstance(min_count, bool) or not isinstance(min_count, (int, np.integer)) or min_count < 1:
        raise ValueError(f"min_count must be an integer >= 1, got {min_count!r}")
    if max_candidates is not None and (
        isinstance(max_candidates, bool) or not isinstance(max_candidates, (int, np.integer))
        or max_candidates < 2
    ):
        raise ValueError(f"max_candidates must be an integer >= 2 or None, got {max_candidates!r}")
    c, z = check_pair(confidence, correct)
    n = c.size
    order = np.argsort(-c, kind="stable")
    c_desc, z_desc = c[order], z[order]
    cand = threshold_candidates(c_desc, candidates, max_candidates)

    # accepted count and correct count at every candidate: items with c >= tau
    cum_z = np.r_[0.0, np.cumsum(z_desc)]
    n_acc = np.searchsorted(-c_desc, -cand, side="right")  # count of c >= tau
    k_acc = cum_z[n_acc]
    tested = n_acc >= min_count
    # label-free start: skip candidates that could not pass even with no error among their
    # items (their count alone rules them out); depends on the confidences only, so the
    # scan stays a fixed sequence (module docstring)
    tested &= np.arange(cand.size) >= first_reachable(
        tested, clopper_pearson_lower(n_acc, n_acc, delta), target)
    n_skipped = int((~tested).sum())
    lower = np.full(cand.size, np.nan)
    lower[tested] = clopper_pearson_lower(k_acc[tested], n_acc[tested], delta)
    passes = tested & (lower >= target)
    fails = tested & ~passes
    first_fail = int(np.argmax(fails)) if fails.any() else cand.size
    ok = np.flatnonzero(passes[:first_fail])
    stop = min(first_fail + 1, cand.size)
    path = [
        ScanStep(float(cand[i]), int(n_acc[i]), float(k_acc[i] / n_acc[i]), float(lower[i]))
        for i in range(stop)
        if tested[i]
    ]
    common: dict[str, Any] = {
        "target": target, "delta": delta, "n": n, "min_count": int(min_count),
        "n_candidates": int(cand.size), "n_skipped": n_skipped, "path": path,
    }

    if ok.size == 0:
        if not tested.any():
            reason = (
                f"no candidate threshold accepts at least min_count={min_count} items, or "
                f"enough to reach {target:g} even with no error (n={n}): too few labels to "
                "certify any threshold"
            )
        else:
            step = path[0]
            reason = (
                f"the highest testable threshold tau={step.tau:.6g} accepts {step.n_accepted} "
                f"items with precision {step.precision:.4f}, whose {100 * (1 - delta):.0f}% "
                f"lower bound {step.lower_bound:.4f} is below the target {target:g}; "
                "fixed-sequence testing stops there"
            )
        return ThresholdReport(
            threshold=None, n_accepted=0, coverage=0.0, precision=math.nan,
            lower_bound=math.nan, expected_errors=0.0, review_load=1.0,
            reason=f"no threshold qualifies: route everything to review ({reason})", **common,
        )

    best = int(ok[-1])
    n_best, k_best = int(n_acc[best]), float(k_acc[best])
    precision = k_best / n_best
    if first_fail < cand.size:
        f = first_fail
        reason = (
            f"scan stopped at tau={cand[f]:.6g} (lower bound {lower[f]:.4f} < target {target:g})"
        )
    else:
        reason = "every tested threshold passed: the lowest candidate is chosen"
    return ThresholdReport(
        threshold=float(cand[best]),
        n_accepted=n_best,
        coverage=n_best / n,
        precision=precision,
        lower_bound=float(lower[best]),
        expected_errors=n_best - k_best,  # = n_accepted * (1 - precision), exactly
        review_load=1.0 - n_best / n,
        reason=reason,
        **common,
    )
