"""Ranking quality of confidence: AUROC, the risk-coverage curve and AURC.

Calibration says whether 80% means 80%; ranking says whether higher confidence means more
likely right, which is what a threshold (auto-accept when c >= tau) actually uses.

Ties are handled so that the result never depends on the input order of items with equal
confidence (a threshold cannot separate them): AUROC uses average ranks; the risk-coverage
curve has one point per distinct confidence; AURC is the expectation over random orderings
of tied items.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .validation import check_pair

__all__ = ["aurc", "auroc", "risk_coverage_curve"]


def _tie_groups(c_sorted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end (exclusive) positions of runs of equal values in a sorted array."""
    n = c_sorted.size
    starts = np.flatnonzero(np.r_[True, c_sorted[1:] != c_sorted[:-1]])
    ends = np.r_[starts[1:], n]
    return starts, ends


def auroc_sorted(c_sorted: np.ndarray, z_sorted: np.ndarray) -> float:
    """AUROC from arrays sorted ascending by confidence (Mann-Whitney U, ties averaged)."""
    n = c_sorted.size
    n_pos = float(z_sorted.sum())
    n_neg = n - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    starts, ends = _tie_groups(c_sorted)
    avg_rank = (starts + ends + 1) / 2.0
    ranks = np.repeat(avg_rank, ends - starts)
    u = float(np.dot(ranks, z_sorted)) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def _risk_coverage_sorted_desc(
    c_desc: np.ndarray, z_desc: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = c_desc.size
    starts, ends = _tie_groups(c_desc)
    cum_err = np.cumsum(1.0 - z_desc)[ends - 1]
    return ends / n, cum_err / ends, c_desc[starts]


def aurc_sorted_desc(c_desc: np.ndarray, z_desc: np.ndarray) -> float:
    n = c_desc.size
    starts, ends = _tie_groups(c_desc)
    sizes = ends - starts
    err = 1.0 - z_desc
    cum = np.r_[0.0, np.cumsum(err)]
    err_before = cum[starts]
    err_in = cum[ends] - err_before
    k = np.arange(1, n + 1, dtype=np.float64)
    # expected errors among the first k items when ties are ordered at random
    expected = np.repeat(err_before, sizes) + (k - np.repeat(starts, sizes)) * np.repeat(
        err_in / sizes, sizes
    )
    return float(np.mean(expected / k))


def auroc(confidence: Any, correct: Any) -> float:
    """Area under the ROC curve of confidence as a score for correctness.

    The probability that a random correct item has higher confidence than a random wrong one
    (ties count 1/2), computed from average ranks in O(n log n). Returns NaN when only one
    class is present (all correct or all wrong): discrimination is then undefined, and NaN
    is more honest than 0.5. ``confidence``/``correct``: shape (n,).
    """
    c, z = check_pair(confidence, correct)
    order = np.argsort(c)
    return auroc_sorted(c[order], z[order])


def risk_coverage_curve(
    confidence: Any, correct: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Selective-prediction curve: accept items with c >= t, for every distinct t, high to low.

    Returns ``(coverage, risk, thresholds)``, each of shape (m,) with m the number of distinct
    confidences: ``coverage[j]`` is the fraction of items with c >= ``thresholds[j]`` and
    ``risk[j]`` the error rate among them. Coverage increases to 1; the last risk is 1 - acc.
    """
    c, z = check_pair(confidence, correct)
    order = np.argsort(-c)
    return _risk_coverage_sorted_desc(c[order], z[order])


def aurc(confidence: Any, correct: Any) -> float:
    """Area under the risk-coverage curve (Geifman & El-Yaniv): mean over k of risk@k.

    Items are accepted one by one in decreasing confidence; risk@k is the error rate of the
    first k. Ties are ordered at random in expectation (exact, not sampled). Lower is better;
    a perfect ranking gives the minimum for the given accuracy, not 0.
    """
    c, z = check_pair(confidence, correct)
    order = np.argsort(-c)
    return aurc_sorted_desc(c[order], z[order])
