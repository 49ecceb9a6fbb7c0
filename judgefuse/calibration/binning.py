"""Bin assignment and per-bin totals shared by ECE, MCE, adaptive CE and reliability diagrams.

Equal-width bins: bin ``i`` is ``[i/n_bins, (i+1)/n_bins)`` and the last bin is closed, so a
confidence of exactly 1.0 lands in the top bin. Edges are computed as ``i / n_bins`` (one
correctly rounded division), which is the same float a user writes as a literal: a confidence
of ``0.1`` therefore lands in bin 1, never in bin 0 by a rounding accident (``np.linspace`` edges
and ``floor(c * n_bins)`` both get some edges wrong by one ulp).

Equal-mass bins: items are sorted by confidence and the sorted sequence is cut into
``n_bins`` consecutive chunks exactly as ``np.array_split`` does: with ``n = q * n_bins + r`` the
first ``r`` chunks get ``q + 1`` items and the rest ``q``; with ``n < n_bins`` the trailing chunks
are empty. How a run of tied confidences cut by a boundary is shared is the metric's business
(see :func:`judgefuse.calibration.scores.adaptive_ce`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "BinTotals",
    "bin_totals",
    "equal_mass_bounds",
    "equal_width_bin_index",
    "equal_width_edges",
]


def equal_width_edges(n_bins: int) -> np.ndarray:
    """Edges ``[0, 1/n, ..., 1]``, shape (n_bins + 1,), each the correctly rounded ``i/n``."""
    return np.arange(n_bins + 1, dtype=np.float64) / n_bins


def equal_width_bin_index(c: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin of each confidence, shape (n,), ints in ``[0, n_bins)``; last bin closed at 1.0."""
    inner = equal_width_edges(n_bins)[1:-1]
    return np.searchsorted(inner, c, side="right").astype(np.intp, copy=False)


def equal_mass_bounds(n: int, n_bins: int) -> np.ndarray:
    """Chunk boundaries in sorted positions, shape (n_bins + 1,), from 0 to n (``np.array_split``)."""
    q, r = divmod(n, n_bins)
    sizes = np.full(n_bins, q, dtype=np.intp)
    sizes[:r] += 1
    return np.r_[0, np.cumsum(sizes)]


@dataclass(frozen=True)
class BinTotals:
    """Per-bin totals, each an array of shape (n_bins,).

    ``weight`` is the (weighted) item count, ``sum_confidence`` and ``sum_correct`` the
    (weighted) sums of c and z. Keeping sums rather than means means empty bins need no special
    case until a mean is asked for, and totals from several batches can simply be added.
    """

    count: np.ndarray
    weight: np.ndarray
    sum_confidence: np.ndarray
    sum_correct: np.ndarray

    @property
    def nonempty(self) -> np.ndarray:
        return self.count > 0

    def gaps(self) -> np.ndarray:
        """|accuracy - mean confidence| per bin, shape (n_bins,); NaN for empty bins."""
        gap = np.full(self.count.shape, np.nan)
        ok = self.weight > 0
        gap[ok] = np.abs(self.sum_correct[ok] - self.sum_confidence[ok]) / self.weight[ok]
        return gap

    def calibration_error(self) -> float:
        """Weighted mean gap: sum_b |S_z,b - S_c,b| / W (the ECE of these bins)."""
        return float(np.abs(self.sum_correct - self.sum_confidence).sum() / self.weight.sum())

    def max_gap(self) -> float:
        """Largest gap over bins with positive weight (the MCE of these bins)."""
        gaps = self.gaps()
        return float(np.max(gaps[~np.isnan(gaps)]))


def bin_totals(
    c: np.ndarray,
    z: np.ndarray,
    bin_index: np.ndarray,
    n_bins: int,
    weight: np.ndarray | None = None,
) -> BinTotals:
    """Totals per bin via ``np.bincount`` (O(n), no Python loop over items or bins)."""
    count = np.bincount(bin_index, minlength=n_bins).astype(np.float64)
    if weight is None:
        w_sum: np.ndarray = count
        s_c = np.bincount(bin_index, weights=c, minlength=n_bins)
        s_z = np.bincount(bin_index, weights=z, minlength=n_bins)
    else:
        w_sum = np.bincount(bin_index, weights=weight, minlength=n_bins)
        s_c = np.bincount(bin_index, weights=weight * c, minlength=n_bins)
        s_z = np.bincount(bin_index, weights=weight * z, minlength=n_bins)
    return BinTotals(count=count, weight=w_sum, sum_confidence=s_c, sum_correct=s_z)
