"""Population estimates from stratified labels (DESIGN.md, "The review loop").

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
* ``ece``, ``brier`` and ``th_score``: a seeded predictive Bayesian bootstrap within strata over
  coarse cells ((coarse bin, correct) for ECE and Brier; (high/low interval, correct) and the
  middle for TH). Per replicate, a stratum's cell shares are drawn from Dirichlet(labelled
  counts + pseudo-counts), the pseudo-counts being z^2 in all, spread over its occupied bins by
  count and split half right, half wrong (the bootstrap analogue of Agresti-Coull: without them
  a small audit sample that is all right would claim the whole stratum is); its ``m_s``
  unlabelled verdicts are drawn from those shares and added to the labelled counts; the
  interval is the percentile interval of the replicated window values. A cell's confidence and
  Brier sums are split between right and wrong by the fine bins (each fine bin's items at its
  mean confidence); the point estimates use the exact sums.

Strata with ``population == 0`` are skipped. A stratum with verdicts but no labels cannot be
estimated, and is never silently dropped: the estimate becomes NaN and the interval is the
conservative one that lets that stratum's share take any value (accuracy/Brier: its share
``N_s/N`` added to the upper bound; ECE/TH: the metric's full range). No labels at all: NaN
estimate with NaN bounds. Every :class:`Interval` names its method and the labels behind it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import norm

from .accumulator import FIXED_POINT_SCALE, CalibrationAccumulator
from .binning import BinTotals
from .th_score import th_score_from_parts
from .validation import check_n_bins

__all__ = [
    "BOOTSTRAP_REPLICATES",
    "TH_RANGE",
    "Interval",
    "StratumData",
    "population_estimates",
    "precision_estimate",
]

BOOTSTRAP_REPLICATES = 300
# TH-Score lies between all-tail-wrong (exp(-1/2) - 1) * 100 and all-tail-right (exp(1/2) - 1) * 100
TH_RANGE = ((math.exp(-0.5) - 1.0) * 100.0, (math.exp(0.5) - 1.0) * 100.0)
_DEFAULT_ACCUMULATOR = CalibrationAccumulator()


@dataclass(frozen=True)
class StratumData:
    """One stratum of a window: its verdict count and its labelled verdicts' accumulator fields.

    ``population`` is ``N_s`` (every verdict of the stratum in the window, labelled or not);
    ``fields`` the :class:`CalibrationAccumulator` counters of its labelled verdicts only.
    """

    name: str
    population: int
    fields: Mapping[str, int]


@dataclass(frozen=True)
class Interval:
    """A population estimate with its interval, the labels behind it and the method's name.

    ``estimate``/``lower``/``upper`` are NaN when there is nothing to estimate from (no labels);
    ``estimate`` alone is NaN (bounds finite) when some stratum with verdicts has no labels.
    """

    estimate: float
    lower: float
    upper: float
    labels: int
    method: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready (NaN -> None)."""

        def clean(v: float) -> float | None:
            return None if math.isnan(v) else float(v)

        return {"estimate": clean(self.estimate), "lower": clean(self.lower),
                "upper": clean(self.upper), "labels": int(self.labels), "method": self.method}


@dataclass(frozen=True)
class _Stratum:
    """Parsed counts of one stratum (fine-bin arrays and the scalar sums)."""

    name: str
    population: int
    n_f: np.ndarray  # per fine bin: labelled count
    k_f: np.ndarray  # correct count
    qc_f: np.ndarray  # fixed-point confidence sum
    brier_sum: float
    th: tuple[int, int, int, int]  # high n, high k, low n, low k

    @property
    def labels(self) -> int:
        return int(self.n_f.sum())

    @property
    def remainder(self) -> int:
        return self.population - self.labels


def _parse(strata: Sequence[StratumData], acc: CalibrationAccumulator, eps: float) -> list[_Stratum]:
    code = next((f"th{round(e * 1000):03d}" for e in acc.th_eps if abs(e - float(eps)) < 1e-12), None)
    if code is None:
        raise ValueError(f"eps={eps} is not tracked by the accumulator; tracked: {acc.th_eps}")
    seen: set[str] = set()
    out = []
    for s in strata:
        if not isinstance(s, StratumData):
            raise TypeError(f"strata must be StratumData, got {type(s).__name__}")
        if s.name in seen:
            raise ValueError(f"stratum {s.name!r} is listed twice")
        seen.add(s.name)
        if isinstance(s.population, bool) or not isinstance(s.population, (int, np.integer)) \
                or s.population < 0:
            raise ValueError(f"stratum {s.name!r}: population must be an integer >= 0, "
                             f"got {s.population!r}")
        try:
            n_f, k_f, qc_f = acc._bins(s.fields)  # same package: the accumulator's validated read
        except ValueError as exc:
            raise ValueError(f"stratum {s.name!r}: {exc}") from None
        labels = int(n_f.sum())
        if labels > s.population:
            raise ValueError(f"stratum {s.name!r}: {labels} labelled verdicts but population "
                             f"{s.population}: labels must come from the stratum's verdicts")
        if s.population == 0:
            continue
        get = s.fields.get
        th = tuple(int(get(code + suffix, 0)) for suffix in ("hn", "hk", "ln", "lk"))
        out.append(_Stratum(s.name, int(s.population), n_f, k_f, qc_f,
                            int(get("sb", 0)) / FIXED_POINT_SCALE, th))  # type: ignore[arg-type]
    return out


def _z(level: float) -> float:
    level = float(level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    return float(norm.ppf(0.5 + level / 2.0))


def _nan(labels: int, method: str) -> Interval:
    return Interval(math.nan, math.nan, math.nan, labels, method)


def _unlabelled_note(missing: list[_Stratum], how: str) -> str:
    if not missing:
        return ""
    names = ", ".join(s.name for s in missing)
    return f"; strata with verdicts but no labels ({names}) {how}: estimate undefined"


# ---------------------------------------------------------------- linear means
def _stratified_mean(
    parts: list[tuple[_Stratum, float, float]], z: float, pseudo: float, method: str,
    value_range: tuple[float, float] = (0.0, 1.0),
) -> Interval:
    """Stratified predictive interval of a window mean of a per-item value in ``value_range``.

    ``parts``: (stratum, sum of the value over its labels, sum of its square). ``pseudo``:
    pseudo-observations (half at each end of the range) added when predicting the unlabelled
    remainder (z^2 for Agresti-Coull, 0 for none).
    """
    total = sum(s.population for s, _, _ in parts)
    lo_v, hi_v = value_range
    labels = sum(s.labels for s, _, _ in parts)
    if labels == 0:
        return _nan(0, method)
    estimate, centre, var, hard_lo, hard_hi = 0.0, 0.0, 0.0, 0.0, 0.0
    missing = []
    for s, x_sum, x2_sum in parts:
        w = s.population / total
        n, m = s.labels, s.remainder
        if n == 0:
            missing.append(s)
            centre += w * lo_v  # the stratum's share may take any value: widen below
            hard_lo += w * lo_v
            hard_hi += w * hi_v
            var_s = 0.0
            continue
        mean = x_sum / n
        estimate += w * mean
        hard_lo += (x_sum + m * lo_v) / total
        hard_hi += (x_sum + m * hi_v) / total
        if m == 0:
            centre += w * mean
            continue
        mid = (lo_v + hi_v) / 2.0
        adj_mean = (x_sum + pseudo * mid) / (n + pseudo)
        if pseudo > 0:  # the pseudo-items sit at both ends: variance of a two-point mixture
            second = (x2_sum + pseudo / 2.0 * (lo_v**2 + hi_v**2)) / (n + pseudo)
        else:
            second = x2_sum / n
        spread = max(second - adj_mean**2, 0.0)
        centre += (x_sum + m * adj_mean) / total
        var_s = (m / total) ** 2 * spread * (1.0 / m + 1.0 / (n + pseudo))
        var += var_s
    half = z * math.sqrt(var)
    widen = sum(s.population for s in missing) / total * (hi_v - lo_v)
    lower = max(centre - half, hard_lo)
    upper = min(centre + half + widen, hard_hi)
    if missing:
        estimate = math.nan
    return Interval(float(estimate), float(lower), float(upper), labels,
                    method + _unlabelled_note(missing, "bounded by the full range of their share"))


def _accuracy(parsed: list[_Stratum], z: float, level: float, what: str) -> Interval:
    parts = [(s, float(s.k_f.sum()), float(s.k_f.sum())) for s in parsed]
    method = (f"stratified {what} sum_s (N_s/N) k_s/n_s; {level:.0%} interval: Agresti-Coull-"
              "adjusted predictive finite-population variance per stratum, intersected with the "
              "hard bounds")
    return _stratified_mean(parts, z, z * z, method)


# ---------------------------------------------------------------- bootstrap over cells
def _predictive_draws(
    counts: np.ndarray, prior: np.ndarray, remainder: int, rng: np.random.Generator,
    replicates: int,
) -> np.ndarray:
    """Replicated window cell counts of one stratum, shape (replicates, cells).

    Labelled counts are kept as observed; the ``remainder`` unlabelled verdicts are drawn from
    cell shares that are themselves drawn from Dirichlet(counts + prior) (a Bayesian bootstrap
    of the labels; the ``prior`` pseudo-counts, z^2 in all, keep a small sample that is all
    correct from claiming the remainder must be too, as Agresti-Coull does for a proportion).
    A fully labelled stratum is fixed.
    """
    if remainder == 0:
        return np.broadcast_to(counts.astype(np.float64), (replicates, counts.size))
    gammas = rng.standard_gamma(np.broadcast_to(counts + prior, (replicates, counts.size)))
    shares = gammas / gammas.sum(axis=1, keepdims=True)
    return counts + rng.multinomial(remainder, shares)


def _split_prior(group_counts: np.ndarray, mass: float) -> np.ndarray:
    """Pseudo-counts: ``mass`` spread over occupied groups by count, half right, half wrong."""
    share = group_counts / group_counts.sum() * mass / 2.0
    return np.r_[share, share]


def _percentile(reps: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    lower, upper = np.quantile(reps, [alpha, 1.0 - alpha])
    return float(lower), float(upper)


def _ece_brier(parsed: list[_Stratum], n_bins: int, level: float, z: float,
               rng: np.random.Generator, replicates: int) -> tuple[Interval, Interval]:
    """ECE and Brier from one bootstrap over (coarse bin, correct) cells per stratum."""
    ece_method = (f"stratified ECE ({n_bins} bins) from population bin totals sum_s (N_s/n_s) x "
                  f"bin sums; {level:.0%} interval: percentile predictive Bayesian bootstrap "
                  "within strata over (bin, correct) cells, z^2 pseudo-counts per stratum")
    brier_method = ("stratified Brier sum_s (N_s/N) mean_s (c-z)^2; "
                    f"{level:.0%} interval: the same bootstrap (cell Brier means from fine bins)")
    labels = sum(s.labels for s in parsed)
    if labels == 0:
        return _nan(0, ece_method), _nan(0, brier_method)
    total = sum(s.population for s in parsed)
    missing = [s for s in parsed if s.labels == 0]
    brier_point = sum(s.population / total * s.brier_sum / s.labels
                      for s in parsed if s.labels)
    if missing:
        share = sum(s.population for s in missing) / total
        known = sum(s.brier_sum for s in parsed if s.labels) / total  # remainder all 0
        unknown_hi = sum(s.brier_sum + s.remainder for s in parsed if s.labels) / total
        return (
            Interval(math.nan, 0.0, 1.0, labels,
                     ece_method + _unlabelled_note(missing, "make the interval [0, 1]")),
            Interval(math.nan, known, min(unknown_hi + share, 1.0), labels,
                     brier_method + _unlabelled_note(missing, "take any value in [0, 1]")),
        )
    cnt = np.zeros(n_bins)
    kk = np.zeros(n_bins)
    qq = np.zeros(n_bins)
    cnt_b = np.zeros((replicates, n_bins))
    kk_b = np.zeros((replicates, n_bins))
    qq_b = np.zeros((replicates, n_bins))
    sb_b = np.zeros(replicates)
    for s in parsed:
        group = s.n_f.size // n_bins
        n_f = s.n_f.astype(np.float64)
        k_f = s.k_f.astype(np.float64)
        q_f = s.qc_f / FIXED_POINT_SCALE
        n_c = n_f.reshape(n_bins, group).sum(axis=1)
        k_c = k_f.reshape(n_bins, group).sum(axis=1)
        q_c = q_f.reshape(n_bins, group).sum(axis=1)
        g = s.population / s.labels
        cnt += g * n_c
        kk += g * k_c
        qq += g * q_c
        # each fine bin's items at its mean confidence: split of the confidence and Brier sums
        mean_f = np.divide(q_f, n_f, out=np.zeros(n_f.size), where=n_f > 0)
        q_right = (mean_f * k_f).reshape(n_bins, group).sum(axis=1)
        b_right = (k_f * (1.0 - mean_f) ** 2).reshape(n_bins, group).sum(axis=1)
        b_wrong = ((n_f - k_f) * mean_f**2).reshape(n_bins, group).sum(axis=1)
        cells = np.r_[k_c, n_c - k_c]  # correct cells, then wrong cells
        bin_mean = np.divide(q_c, n_c, out=np.zeros(n_bins), where=n_c > 0)
        # a cell never observed takes its bin's mean confidence
        mean_c = np.where(cells > 0, np.divide(np.r_[q_right, q_c - q_right], cells,
                                               out=np.zeros(cells.size), where=cells > 0),
                          np.r_[bin_mean, bin_mean])
        mean_b = np.where(cells > 0, np.divide(np.r_[b_right, b_wrong], cells,
                                               out=np.zeros(cells.size), where=cells > 0),
                          np.r_[(1.0 - bin_mean) ** 2, bin_mean**2])
        draws = _predictive_draws(cells, _split_prior(n_c, z * z), s.remainder, rng, replicates)
        right, wrong = draws[:, :n_bins], draws[:, n_bins:]
        cnt_b += right + wrong
        kk_b += right
        qq_b += right * mean_c[:n_bins] + wrong * mean_c[n_bins:]
        # labelled part exact, the drawn remainder at the cell means
        sb_b += s.brier_sum + (draws - cells) @ mean_b
    ece = float(np.abs(kk - qq).sum() / total)
    ece_reps = np.abs(kk_b - qq_b).sum(axis=1) / cnt_b.sum(axis=1)
    lo, hi = _percentile(ece_reps, level)
    lo_b, hi_b = _percentile(sb_b / total, level)
    return (Interval(ece, lo, hi, labels, ece_method),
            Interval(float(brier_point), lo_b, hi_b, labels, brier_method))


def _th_from_cells(cells: np.ndarray, total: float) -> np.ndarray:
    """TH-Score from (..., 5) population cell totals: high right, low right, high wrong, low wrong, other."""
    hn = cells[..., 0] + cells[..., 2]
    ln = cells[..., 1] + cells[..., 3]
    acc_h = cells[..., 0] / np.maximum(hn, 1e-300)
    acc_l = cells[..., 1] / np.maximum(ln, 1e-300)
    term_h = np.where(hn > 0, (np.exp(acc_h - 0.5) - 1.0) * 100.0 * hn / total, 0.0)
    term_l = np.where(ln > 0, (np.exp(acc_l - 0.5) - 1.0) * 100.0 * ln / total, 0.0)
    return 0.5 * (term_h + term_l)


def _th(parsed: list[_Stratum], eps: float, level: float, z: float, rng: np.random.Generator,
        replicates: int) -> Interval:
    method = (f"stratified TH-Score (eps {eps:g}) from population interval shares and accuracies "
              f"sum_s (N_s/N) x interval counts / n_s; {level:.0%} interval: percentile predictive "
              "Bayesian bootstrap within strata over (interval, correct) cells, z^2 pseudo-counts "
              "per stratum")
    labels = sum(s.labels for s in parsed)
    if labels == 0:
        return _nan(0, method)
    missing = [s for s in parsed if s.labels == 0]
    if missing:
        return Interval(math.nan, TH_RANGE[0], TH_RANGE[1], labels,
                        method + _unlabelled_note(missing, "make the interval TH's full range"))
    total = float(sum(s.population for s in parsed))
    point = np.zeros(5)
    boot = np.zeros((replicates, 5))
    for s in parsed:
        hn, hk, ln, lk = s.th
        other = s.labels - hn - ln
        cells = np.array([hk, lk, hn - hk, ln - lk, other], dtype=np.float64)
        point += s.population / s.labels * cells
        prior = np.r_[_split_prior(np.array([hn, ln, other], dtype=np.float64), z * z)[[0, 1, 3, 4]],
                      z * z * other / s.labels]
        boot += _predictive_draws(cells, prior, s.remainder, rng, replicates)
    hn, ln = point[0] + point[2], point[1] + point[3]
    estimate = th_score_from_parts(point[0] / hn if hn else 0.0, min(hn / total, 1.0),
                                   point[1] / ln if ln else 0.0, min(ln / total, 1.0))
    lo, hi = _percentile(_th_from_cells(boot, total), level)
    return Interval(float(estimate), lo, hi, labels, method)


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
    parsed = _parse(strata, acc, eps)
    rng = np.random.default_rng(seed)
    ece, brier = _ece_brier(parsed, n_bins, level, z, rng, BOOTSTRAP_REPLICATES)
    return {
        "accuracy": _accuracy(parsed, z, level, "accuracy"),
        "ece": ece,
        "brier": brier,
        "th_score": _th(parsed, float(eps), level, z, rng, BOOTSTRAP_REPLICATES),
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
    parsed = _parse(strata, acc, acc.th_eps[0])
    return _accuracy(parsed, _z(level), level, "auto-accept precision")
