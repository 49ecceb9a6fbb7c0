"""Bootstrap intervals of the non-linear stratified estimates: ECE, Brier and TH-Score.

See :mod:`.stratified` for the estimators and the interval's description (a predictive
Bayesian bootstrap within strata over coarse cells, with two pseudo-labels per window split over
the strata by their unlabelled verdicts).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

from .accumulator import FIXED_POINT_SCALE
from .stratified_data import Interval, ParsedStratum, nan_interval, unlabelled_note
from .th_score import th_score_from_parts

__all__ = ["BOOTSTRAP_PRIOR", "BOOTSTRAP_REPLICATES", "TH_RANGE", "ece_brier_intervals",
           "ece_interval_from_bins", "th_interval"]

BOOTSTRAP_REPLICATES = 300
# pseudo-labels per window in the bootstrap, split over the strata by their unlabelled
# verdicts (what the pseudo-labels stand in for; a fully labelled stratum needs none) and within
# a stratum half right and half wrong (Jeffreys-like). Amount: with z^2 (~3.84, Agresti-Coull's)
# per stratum a handful of audit labels was pulled so far toward 50% errors that Brier intervals
# missed low in the review-loop simulation (coverage 0.79-0.84); with 1 per stratum every
# ECE/Brier/TH coverage there was 0.92-1.00. Split: one per stratum put half a wrong
# pseudo-label on each of active audits' sparse near-certain bands (6-30 labels at precision
# ~0.995), and TH-Score, whose high interval they are, covered 0.838 of 1,000 resampled streams
# of the synthetic mixture (uniform audits 0.947; bench_active_audit_coverage.py): its interval
# sat below the truth. Split by population instead, a fully labelled review stratum took most
# of them and the one sampled stratum too few: ECE covered 0.870-0.930 in bench_review_sim.py
# (0.950-0.995 split by the unlabelled).
BOOTSTRAP_PRIOR = 2.0
# TH-Score lies between all-tail-wrong (exp(-1/2) - 1) * 100 and all-tail-right (exp(1/2) - 1) * 100
TH_RANGE = ((math.exp(-0.5) - 1.0) * 100.0, (math.exp(0.5) - 1.0) * 100.0)


def _predictive_draws(
    counts: np.ndarray, prior: np.ndarray, remainder: int, rng: np.random.Generator,
    replicates: int,
) -> np.ndarray:
    """Replicated window cell counts of one stratum, shape (replicates, cells).

    Labelled counts are kept as observed; the ``remainder`` unlabelled verdicts are drawn from
    cell shares that are themselves drawn from Dirichlet(counts + prior) (a Bayesian bootstrap
    of the labels; the ``prior`` pseudo-counts keep a small sample that is all correct from
    claiming the remainder must be too).
    A fully labelled stratum is fixed.
    """
    if remainder == 0:
        return np.broadcast_to(counts.astype(np.float64), (replicates, counts.size))
    gammas = rng.standard_gamma(np.broadcast_to(counts + prior, (replicates, counts.size)))
    shares = gammas / gammas.sum(axis=1, keepdims=True)
    return counts + rng.multinomial(remainder, shares)


def _prior_mass(stratum: ParsedStratum, unlabelled: int) -> float:
    """The stratum's share of the window's :data:`BOOTSTRAP_PRIOR` pseudo-labels: its share of
    the window's ``unlabelled`` verdicts."""
    return BOOTSTRAP_PRIOR * stratum.remainder / max(unlabelled, 1)


def _split_prior(group_counts: np.ndarray, mass: float) -> np.ndarray:
    """Pseudo-counts: ``mass`` spread over occupied groups by count, half right, half wrong."""
    share = group_counts / group_counts.sum() * mass / 2.0
    return np.r_[share, share]


def _percentile(reps: np.ndarray, level: float) -> tuple[float, float]:
    alpha = (1.0 - level) / 2.0
    lower, upper = np.quantile(reps, [alpha, 1.0 - alpha])
    return float(lower), float(upper)


def ece_interval_from_bins(gaps: np.ndarray, gap_reps: np.ndarray, level: float) -> tuple[float, float]:
    """The ECE interval from the window's per-bin gaps and their replicates.

    ``gaps``: per coarse bin, the estimated window total of ``z - c`` over the window's ``N``
    (the ECE is ``sum |gaps|``); ``gap_reps``: the same per bootstrap replicate, shape
    (replicates, bins). Why not the percentile interval of ``sum |gap_reps|``: the plug-in
    ``sum |gap|`` is biased up (``|x|`` of a noisy ``x``, ~0.8 of its noise per bin when the
    true gap is 0), and every replicate adds that bias a second time, so over 300 resampled
    streams per pool of ``bench_active_audit_coverage.py`` the truth lay below the whole
    interval in 0.10-0.18 of streams on the shared pools and 0.60 on a calibrated mixture
    (coverage 0.81-0.91 and 0.39). The interval here is centred on the mean of two estimates
    biased in opposite directions: the plug-in (up) and the per-bin debiased
    ``sum sqrt(max(gap^2 - v, 0))``, ``v`` the replicates' variance of the bin's gap (the
    squared gap less its variance is unbiased for the squared true gap, as in Kumar et al.
    2019's debiased estimator; its square root is biased down, by Jensen's inequality, by about
    as much on those pools: +0.000 to -0.010 against +0.008 to +0.012). Its half-width is ``z``
    times the replicates' standard deviation of the linearised ECE ``sum sign(gap) x gap_rep``
    (the delta method: the sd of ``sum |gap_rep|`` folds at 0 and understates the spread there),
    clipped to [0, 1]. A window without remainder to predict (every replicate equal) gives the
    point. Coverage over 1,000 streams per pool: 0.967-0.994, 1.06-1.22x the percentile
    interval's width (results page).
    """
    z = float(norm.ppf(0.5 + level / 2.0))
    var = gap_reps.var(axis=0)
    plug_in = float(np.abs(gaps).sum())
    debiased = float(np.sqrt(np.maximum(gaps**2 - var, 0.0)).sum())
    centre = (plug_in + debiased) / 2.0
    half = z * float((gap_reps @ np.sign(gaps)).std())
    return max(centre - half, 0.0), min(centre + half, 1.0)


def ece_brier_intervals(parsed: list[ParsedStratum], n_bins: int, level: float,
               rng: np.random.Generator, replicates: int) -> tuple[Interval, Interval]:
    """ECE and Brier from one bootstrap over (coarse bin, correct) cells per stratum (the ECE's
    interval: :func:`ece_interval_from_bins`)."""
    ece_method = (f"stratified ECE ({n_bins} bins) from population bin totals sum_s (N_s/n_s) x "
                  f"bin sums; {level:.0%} interval: centred between the plug-in and the per-bin "
                  "debiased ECE, half-width z x the linearised ECE's sd over a predictive "
                  "Bayesian bootstrap within strata over (bin, correct) cells, two pseudo-labels "
                  "per window split by unlabelled verdicts")
    brier_method = ("stratified Brier sum_s (N_s/N) mean_s (c-z)^2; "
                    f"{level:.0%} interval: the same bootstrap (cell Brier means from fine bins)")
    labels = sum(s.labels for s in parsed)
    if labels == 0:
        return nan_interval(0, ece_method), nan_interval(0, brier_method)
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
                     ece_method + unlabelled_note(missing, "make the interval [0, 1]")),
            Interval(math.nan, known, min(unknown_hi + share, 1.0), labels,
                     brier_method + unlabelled_note(missing, "take any value in [0, 1]")),
        )
    unlabelled = sum(s.remainder for s in parsed)
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
        prior = _split_prior(n_c, _prior_mass(s, unlabelled))
        draws = _predictive_draws(cells, prior, s.remainder, rng, replicates)
        right, wrong = draws[:, :n_bins], draws[:, n_bins:]
        cnt_b += right + wrong
        kk_b += right
        qq_b += right * mean_c[:n_bins] + wrong * mean_c[n_bins:]
        # labelled part exact, the drawn remainder at the cell means
        sb_b += s.brier_sum + (draws - cells) @ mean_b
    ece = float(np.abs(kk - qq).sum() / total)
    lo, hi = ece_interval_from_bins((kk - qq) / total, (kk_b - qq_b) / total, level)
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


def th_interval(parsed: list[ParsedStratum], eps: float, level: float, rng: np.random.Generator,
        replicates: int) -> Interval:
    method = (f"stratified TH-Score (eps {eps:g}) from population interval shares and accuracies "
              f"sum_s (N_s/N) x interval counts / n_s; {level:.0%} interval: percentile predictive "
              "Bayesian bootstrap within strata over (interval, correct) cells, two pseudo-labels "
              "per window split by unlabelled verdicts")
    labels = sum(s.labels for s in parsed)
    if labels == 0:
        return nan_interval(0, method)
    missing = [s for s in parsed if s.labels == 0]
    if missing:
        return Interval(math.nan, TH_RANGE[0], TH_RANGE[1], labels,
                        method + unlabelled_note(missing, "make the interval TH's full range"))
    total = float(sum(s.population for s in parsed))
    unlabelled = sum(s.remainder for s in parsed)
    point = np.zeros(5)
    boot = np.zeros((replicates, 5))
    for s in parsed:
        hn, hk, ln, lk = s.th
        other = s.labels - hn - ln
        cells = np.array([hk, lk, hn - hk, ln - lk, other], dtype=np.float64)
        point += s.population / s.labels * cells
        groups = np.array([hn, ln, other], dtype=np.float64)
        mass = _prior_mass(s, unlabelled)
        prior = np.r_[_split_prior(groups, mass)[[0, 1, 3, 4]], mass * other / s.labels]
        boot += _predictive_draws(cells, prior, s.remainder, rng, replicates)
    hn, ln = point[0] + point[2], point[1] + point[3]
    estimate = th_score_from_parts(point[0] / hn if hn else 0.0, min(hn / total, 1.0),
                                   point[1] / ln if ln else 0.0, min(ln / total, 1.0))
    lo, hi = _percentile(_th_from_cells(boot, total), level)
    return Interval(float(estimate), lo, hi, labels, method)
