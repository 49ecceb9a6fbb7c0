"""Point calibration scores of a judge: accuracy, ECE, adaptive CE, MCE, Brier, NLL, ICE, MacroCE.

All take ``confidence`` (shape (n,), floats in [0, 1]: the confidence of the *chosen* answer)
and ``correct`` (shape (n,), 0/1 or bool: whether the chosen answer was right), validate them
up front (see :mod:`.validation`) and return a Python float. Lower is better for every error.

Why several: each answers a different question. ECE/MCE/adaptive CE ask "does 80% mean 80%?"
per confidence bin; Brier and NLL are proper scoring rules (reward sharpness too); ICE drops the
binning; MacroCE ("Re-Examining Calibration") averages the error on correct and on wrong items separately so a
judge cannot look calibrated just by being accurate and always confident.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .binning import bin_totals, equal_mass_bounds, equal_width_bin_index
from .validation import check_correct, check_n_bins, check_pair, check_weights

__all__ = ["accuracy", "adaptive_ce", "brier", "ece", "ice", "macroce", "mce", "nll"]

NLL_CLIP = 1e-12


# ------------------------------------------------ core (validated arrays; shared with summary,
# bootstrap and comparison, which validate once and call these per view or resample)
def ece_arrays(c: np.ndarray, z: np.ndarray, n_bins: int, w: np.ndarray | None = None) -> float:
    return bin_totals(c, z, equal_width_bin_index(c, n_bins), n_bins, w).calibration_error()


def _mce(c: np.ndarray, z: np.ndarray, n_bins: int) -> float:
    return bin_totals(c, z, equal_width_bin_index(c, n_bins), n_bins).max_gap()


def adaptive_ce_sorted(c_sorted: np.ndarray, z_sorted: np.ndarray, n_bins: int) -> float:
    """Equal-mass CE from arrays sorted ascending by confidence (see :func:`adaptive_ce`)."""
    n = c_sorted.size
    bounds = equal_mass_bounds(n, n_bins)
    cum_c = np.r_[0.0, np.cumsum(c_sorted)]
    cum_z = np.r_[0.0, np.cumsum(z_sorted)]
    # a tie group cut by a boundary is shared at its mean correctness
    starts = np.flatnonzero(np.r_[True, c_sorted[1:] != c_sorted[:-1]])
    ends = np.r_[starts[1:], n]
    g = np.searchsorted(starts, bounds, side="right") - 1
    s, e = starts[g], ends[g]
    z_at = cum_z[s] + (bounds - s) * (cum_z[e] - cum_z[s]) / (e - s)
    return float(np.abs(np.diff(z_at) - np.diff(cum_c[bounds])).sum() / n)


def brier_arrays(c: np.ndarray, z: np.ndarray, w: np.ndarray | None = None) -> float:
    sq = (c - z) ** 2
    return float(sq.mean() if w is None else np.dot(w, sq) / w.sum())


def nll_arrays(c: np.ndarray, z: np.ndarray) -> float:
    p = np.clip(c, NLL_CLIP, 1.0 - NLL_CLIP)
    # probability given to what happened: c if right, 1 - c if wrong (one log per item)
    return float(-np.mean(np.log(np.where(z == 1.0, p, 1.0 - p))))


def ice_arrays(c: np.ndarray, z: np.ndarray) -> float:
    return float(np.abs(z - c).mean())


def macroce_arrays(c: np.ndarray, z: np.ndarray) -> float:
    right = z == 1.0
    n_right = int(right.sum())
    n_wrong = z.size - n_right
    parts = []
    if n_right:
        parts.append(float((1.0 - c[right]).sum() / n_right))
    if n_wrong:
        parts.append(float(c[~right].sum() / n_wrong))
    return float(sum(parts) / len(parts))


# ---------------------------------------------------------------- public API
def accuracy(correct: Any) -> float:
    """Fraction of items whose chosen answer is correct. ``correct``: shape (n,), 0/1 or bool."""
    return float(check_correct(correct).mean())


def ece(
    confidence: Any, correct: Any, *, n_bins: int = 10, sample_weight: Any = None
) -> float:
    """Expected calibration error over ``n_bins`` equal-width bins.

    ECE = sum_b (W_b / W) |acc_b - conf_b| = (1/W) sum_b |sum_{i in b} w_i (z_i - c_i)|.
    Bin i is ``[i/n_bins, (i+1)/n_bins)``, the last bin is closed (see :mod:`.binning`), empty
    bins contribute 0. ``sample_weight`` (shape (n,), >= 0) gives the weighted ECE used by the
    distribution-aligned comparison ("When Calibration Rankings Reverse", DA-ECE): W_b and the bin accuracy/confidence
    become weighted.
    """
    c, z = check_pair(confidence, correct)
    return ece_arrays(c, z, check_n_bins(n_bins), check_weights(sample_weight, c.size))


def adaptive_ce(confidence: Any, correct: Any, *, n_bins: int = 10) -> float:
    """Calibration error over ``n_bins`` equal-mass bins (never call it "ACE" alone).

    Items are sorted by confidence and cut into consecutive chunks like ``np.array_split``
    (the first ``n % n_bins`` chunks hold one extra item; with n < n_bins the last chunks are
    empty). Result: sum_b (n_b / n) |acc_b - conf_b| over non-empty chunks. Equal mass avoids
    the near-empty bins that make equal-width ECE noisy when confidences cluster near 1, as
    judge confidences do.

    Ties: a run of equal confidences cut by a chunk boundary is shared between the two chunks
    at the run's mean correctness (the expectation over random orderings of the tied items),
    so the result never depends on the input order of items the judge cannot tell apart.
    """
    c, z = check_pair(confidence, correct)
    order = np.argsort(c)  # tie order is irrelevant (see Ties)
    return adaptive_ce_sorted(c[order], z[order], check_n_bins(n_bins))


def mce(confidence: Any, correct: Any, *, n_bins: int = 10) -> float:
    """Maximum calibration error: the largest |acc_b - conf_b| over *non-empty* equal-width bins.

    The worst-case view: one bin where 95% confidence meets 40% accuracy is a risk even if it
    holds few items. Sensitive to tiny bins by design.
    """
    c, z = check_pair(confidence, correct)
    return _mce(c, z, check_n_bins(n_bins))


def brier(confidence: Any, correct: Any, *, sample_weight: Any = None) -> float:
    """Brier score mean (c - z)^2 (weighted mean with ``sample_weight``, shape (n,))."""
    c, z = check_pair(confidence, correct)
    return brier_arrays(c, z, check_weights(sample_weight, c.size))


def nll(confidence: Any, correct: Any) -> float:
    """Negative log-likelihood of the correctness under c: -mean(z log c + (1-z) log(1-c)).

    c is clipped to [1e-12, 1 - 1e-12] first so a confident error costs about 27.6 nats
    instead of infinity: one such item should hurt, not make the score unusable.
    """
    c, z = check_pair(confidence, correct)
    return nll_arrays(c, z)


def ice(confidence: Any, correct: Any) -> float:
    """Instance-level calibration error mean |z - c| ("Re-Examining Calibration"): ECE without the binning."""
    c, z = check_pair(confidence, correct)
    return ice_arrays(c, z)


def macroce(confidence: Any, correct: Any) -> float:
    """Macro-averaged calibration error ("Re-Examining Calibration"): (ICE_pos + ICE_neg) / 2.

    ICE_pos = mean over correct items of (1 - c), ICE_neg = mean over wrong items of c. Each
    class counts half whatever the accuracy, so a 95%-accurate judge cannot hide overconfident
    errors behind its many correct items.

    When one class is empty (all correct, or all wrong) its term is undefined and the result
    is the other class's term alone (e.g. all correct -> mean(1 - c)); the score thus stays
    finite and still says how far the judge is from perfect on the items it has.
    """
    c, z = check_pair(confidence, correct)
    return macroce_arrays(c, z)
