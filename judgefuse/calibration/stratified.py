"""Population estimates from stratified labels (docs/design.md, 'The review loop').

Labels come back for what the routing chose, not for a uniform sample: everything routed to
review is queued (inclusion probability 1), auto-accepted verdicts are audited with probability
``r``. Each verdict is stamped with its stratum at decision time and the queue serves items in
random order, so the labelled part of stratum ``s`` is a simple random sample of its ``N_s``
verdicts. The population value of a mean is then the stratified estimator

    sum_s (N_s / N) * mean_s(x),     N = sum_s N_s,

i.e. each labelled verdict of stratum ``s`` stands for ``N_s / n_s`` verdicts. Every estimate here
is read from the per-stratum :class:`~judgefuse.calibration.CalibrationAccumulator` fields (fine
bins, Brier sums, TH interval counts), so the cost is O(strata x fine bins) whatever the number
of labels.

What the intervals cover: the value over the *window's* ``N`` verdicts (a finite population).
Within a stratum the window's total is the labelled part (known) plus the ``m_s = N_s - n_s``
unlabelled verdicts, which are predicted from the labelled ones; a fully labelled stratum
therefore contributes no uncertainty, and a barely sampled one contributes close to its
sampling variance (the finite-population correction, in predictive form).

* ``accuracy`` (and :func:`precision_estimate`): per stratum an Agresti-Coull-type adjusted
  proportion ``p~ = (k + z^2/2) / (n + z^2)`` predicts the unlabelled remainder, with variance
  ``(m/N_s)^2 p~(1-p~) (1/m + 1/(n + z^2))``; stratum variances are added with weights
  ``(N_s/N)^2`` and the normal interval is intersected with the hard bounds (every unlabelled
  verdict wrong / right). The pseudo-counts keep the interval from collapsing when a small audit
  sample is all correct (plain stratified Wald undercovers there); the seeded simulations in
  ``tests/calibration/test_stratified.py`` and ``benchmarks/bench_review_sim.py`` print the
  coverage next to the 95% target.
* ``brier``: the same linear interval over ``x = (c - z)^2`` (its square summed from the fine
  bins), the guard's pseudo-verdicts at the Brier of a right and a wrong verdict at the
  stratum's mean confidence. The bootstrap below, applied to the Brier score, covered 0.914 on
  resampled Trust-or-Escalate majority streams (``benchmarks/bench_model_assisted_crossfit.py``).
* The guard's ``z^2`` pseudo-labels are the window's, split over the labelled strata by their
  shares (:func:`_stratified_mean`): one stratum gets them all (plain Agresti-Coull).
* ``ece`` and ``th_score``: a seeded predictive Bayesian bootstrap within strata over
  coarse cells ((coarse bin, correct) for ECE; (high/low interval, correct) and the
  middle for TH). Per replicate, a stratum's cell shares are drawn from Dirichlet(labelled
  counts + pseudo-counts), the pseudo-counts being its share of the window's two labels by
  unlabelled verdicts (``BOOTSTRAP_PRIOR``; one per stratum put half a wrong label on each of
  active audits' sparse near-certain bands), spread over its occupied bins by count and split half right,
  half wrong (Jeffreys-like:
  without them a small audit sample that is all right would claim the whole stratum is); its ``m_s``
  unlabelled verdicts are drawn from those shares and added to the labelled counts. TH's
  interval is the percentile interval of the replicated window values; ECE's is not (the
  plug-in ECE is biased up and a percentile interval of its replicates lies above a small true
  ECE): it is centred between the plug-in and a per-bin debiased ECE with a delta-method
  half-width from the replicated bin gaps
  (:func:`~.stratified_bootstrap.ece_interval_from_bins`). A cell's confidence and
  Brier sums are split between right and wrong by the fine bins (each fine bin's items at its
  mean confidence); the point estimates use the exact sums.

Layout: this module holds the linear estimates and the public API; the bootstrap intervals are
in :mod:`.stratified_bootstrap`, the input/result types and the validated read of the fields in
:mod:`.stratified_data`.

Strata with ``population == 0`` are skipped. A stratum with verdicts but no labels cannot be
estimated, and is never silently dropped: the estimate becomes NaN and the interval is the
conservative one that lets that stratum's share take any value (accuracy/Brier: its share
``N_s/N`` added to the upper bound; ECE/TH: the metric's full range). No labels at all: NaN
estimate with NaN bounds. Every :class:`Interval` names its method and the labels behind it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.stats import norm

from .accumulator import FIXED_POINT_SCALE, CalibrationAccumulator
from .stratified_bootstrap import BOOTSTRAP_PRIOR, BOOTSTRAP_REPLICATES, TH_RANGE, ece_brier_intervals, th_interval
from .stratified_data import Interval, ParsedStratum, StratumData, nan_interval, parse_strata, unlabelled_note
from .validation import check_n_bins

__all__ = [
    "BOOTSTRAP_PRIOR",
    "BOOTSTRAP_REPLICATES",
    "TH_RANGE",
    "Interval",
    "StratumData",
    "population_estimates",
    "precision_estimate",
]

_DEFAULT_ACCUMULATOR = CalibrationAccumulator()


def _z(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    return float(norm.ppf(0.5 + level / 2.0))


# ---------------------------------------------------------------- linear means
def _stratified_mean(
    parts: list[tuple[ParsedStratum, float, float]], z: float, pseudo: float, method: str,
    value_range: tuple[float, float] = (0.0, 1.0),
    guard_values: Sequence[tuple[float, float]] | None = None,
) -> Interval:
    """Stratified predictive interval of a window mean of a per-item value in ``value_range``.

    ``parts``: (stratum, sum of the value over its labels, sum of its square). ``pseudo``:
    pseudo-observations (half at each end of the range) added when predicting the unlabelled
    remainder (z^2 for Agresti-Coull, 0 for none), half at each of ``guard_values[i]`` for
    part ``i`` (default: the ends of ``value_range``), **once for the window**: each labelled
    stratum takes its population's share of them. One stratum gets all of them (the plain
    Agresti-Coull guard); ``k`` strata do not get ``k`` times as many. Given ``z^2`` each, every
    stratum's mean moved towards the middle of the range by ``z^2 / (n_s + z^2)`` of its gap,
    and the window's centre with them, by a bias that grows with the number of strata while
    the interval shrinks: five audit strata of about 25 labels at precision 0.9 (active audits'
    confidence bands, or audit rates changed over time) covered the truth in 0.31 of streams
    (``benchmarks/bench_active_audits.py``; 0.96 with the split).
    """
    total = sum(s.population for s, _, _ in parts)
    lo_v, hi_v = value_range
    labels = sum(s.labels for s, _, _ in parts)
    if labels == 0:
        return nan_interval(0, method)
    estimate, centre, var, hard_lo, hard_hi = 0.0, 0.0, 0.0, 0.0, 0.0
    labelled_total = sum(s.population for s, _, _ in parts if s.labels > 0)
    missing = []
    for i, (s, x_sum, x2_sum) in enumerate(parts):
        w = s.population / total
        g_lo, g_hi = value_range if guard_values is None else guard_values[i]
        n, m = s.labels, s.remainder
        if n == 0:
            missing.append(s)
            centre += w * lo_v  # the stratum's share may take any value: widen below
            hard_lo += w * lo_v
            hard_hi += w * hi_v
            continue
        mean = x_sum / n
        estimate += w * mean
        hard_lo += (x_sum + m * lo_v) / total
        hard_hi += (x_sum + m * hi_v) / total
        if m == 0:
            centre += w * mean
            continue
        share = pseudo * s.population / labelled_total  # split by the labelled strata's shares
        adj_mean = (x_sum + share * (g_lo + g_hi) / 2.0) / (n + share)
        if share > 0:  # the pseudo-items sit at both guard values: variance of a two-point mixture
            second = (x2_sum + share / 2.0 * (g_lo**2 + g_hi**2)) / (n + share)
        else:
            second = x2_sum / n
        spread = max(second - adj_mean**2, 0.0)
        centre += (x_sum + m * adj_mean) / total
        var += (m / total) ** 2 * spread * (1.0 / m + 1.0 / (n + share))
    half = z * math.sqrt(var)
    widen = sum(s.population for s in missing) / total * (hi_v - lo_v)
    lower = max(centre - half, hard_lo)
    upper = min(centre + half + widen, hard_hi)
    if missing:
        estimate = math.nan
    return Interval(float(estimate), float(lower), float(upper), labels,
                    method + unlabelled_note(missing, "bounded by the full range of their share"))


def _accuracy(parsed: list[ParsedStratum], z: float, level: float, what: str) -> Interval:
    parts = [(s, float(s.k_f.sum()), float(s.k_f.sum())) for s in parsed]
    method = (f"stratified {what} sum_s (N_s/N) k_s/n_s; {level:.0%} interval: Agresti-Coull-"
              "adjusted predictive finite-population variance per stratum, intersected with the "
              "hard bounds")
    return _stratified_mean(parts, z, z * z, method)


def _brier(parsed: list[ParsedStratum], z: float, level: float) -> Interval:
    """The stratified Brier score as the linear mean it is: ``(c - z)^2`` per verdict, its
    square summed from the fine bins (each fine bin's verdicts at its mean confidence), and
    the small-sample guard's pseudo-verdicts at the Brier of a right and a wrong verdict at the
    stratum's mean labelled confidence (``(1 - c)^2`` and ``c^2``: the ends of [0, 1] would
    overstate a stratum's spread, as in :mod:`.model_assisted`)."""
    parts, guards = [], []
    for s in parsed:
        n_f, k_f = s.n_f.astype(np.float64), s.k_f.astype(np.float64)
        mean_f = np.divide(s.qc_f / FIXED_POINT_SCALE, n_f, out=np.zeros(n_f.size), where=n_f > 0)
        fourth = float((k_f * (1.0 - mean_f) ** 4 + (n_f - k_f) * mean_f**4).sum())
        parts.append((s, float(s.brier_sum), fourth))
        mean_c = float((n_f * mean_f).sum() / n_f.sum()) if n_f.sum() > 0 else 0.5
        guards.append(((1.0 - mean_c) ** 2, mean_c**2))
    method = (f"stratified Brier sum_s (N_s/N) mean_s (c-z)^2; {level:.0%} interval: predictive "
              "finite-population variance per stratum with pseudo-verdicts at the Brier of a right "
              "and a wrong verdict at its mean confidence, intersected with the hard bounds")
    return _stratified_mean(parts, z, z * z, method, guard_values=guards)


# ---------------------------------------------------------------- public API
def population_estimates(
    strata: Sequence[StratumData],
    *,
    accumulator: CalibrationAccumulator | None = None,
    n_bins: int = 10,
    eps: float = 0.1,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Stratified window estimates of ``accuracy``, ``ece``, ``brier`` and ``th_score``.

    ``strata``: one :class:`StratumData` per stratum (names distinct; e.g. ``review`` and one
    ``auto@r`` per audit rate in force). ``accumulator``: the configuration the fields were
    written with (default ``CalibrationAccumulator()``); ``n_bins`` must divide its fine bins,
    ``eps`` must be one of its tracked TH eps. ``level``: two-sided interval level. ``seed``:
    the bootstrap's (ECE, TH) seed, so a report is reproducible. Cost O(strata x fine bins +
    strata x replicates x cells), independent of the number of labels. Raises ``ValueError``
    for inconsistent input (more labels than verdicts in a stratum, duplicate names, ...).
    """
    acc = _DEFAULT_ACCUMULATOR if accumulator is None else accumulator
    n_bins = check_n_bins(n_bins)
    if acc.fine_bins % n_bins:
        raise ValueError(f"n_bins={n_bins} must divide the accumulator's fine_bins={acc.fine_bins}")
    z = _z(level)
    parsed = parse_strata(strata, acc, eps)
    rng = np.random.default_rng(seed)
    ece, _ = ece_brier_intervals(parsed, n_bins, level, rng, BOOTSTRAP_REPLICATES)
    return {
        "accuracy": _accuracy(parsed, z, level, "accuracy"),
        "ece": ece,
        "brier": _brier(parsed, z, level),
        "th_score": th_interval(parsed, float(eps), level, rng, BOOTSTRAP_REPLICATES),
    }


def precision_estimate(
    strata: Sequence[StratumData],
    *,
    accumulator: CalibrationAccumulator | None = None,
    level: float = 0.95,
) -> Interval:
    """Precision of auto-accepted verdicts: the stratified accuracy over the auto strata.

    The caller passes only the auto-accepted strata (``auto@r``: N = every auto-accepted verdict
    at audit rate r, fields = its audit labels). Same interval as ``accuracy`` in
    :func:`population_estimates`.
    """
    acc = _DEFAULT_ACCUMULATOR if accumulator is None else accumulator
    parsed = parse_strata(strata, acc, acc.th_eps[0])
    return _accuracy(parsed, _z(level), level, "auto-accept precision")
