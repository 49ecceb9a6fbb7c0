"""Paired bootstrap statistics of two judges drawn over cells: what ``compare`` resamples past
:data:`~judgefuse.calibration.bootstrap.LARGE_CELLS` (resamples x items), as ``eval``'s large rows do.

Every statistic the comparison resamples is a function of sums over items: per bin, the sum of
``z - c`` and the count (ECE), the squared errors (Brier), the right and wrong counts (accuracy,
and so the distribution-aligned weights), each split by the views' item sets (both right or both
wrong). An item's place in all of them is fixed by a few small integers (each judge's bin and
correctness; for the candidate-aligned view the label and the bins of ``p_a`` and ``1 - p_a``), so
the items fall into cells inside which only the confidences vary, within a bin's width.
:func:`~judgefuse.calibration.bootstrap.cell_sums` draws each resample's cell counts exactly
(multinomial) and each cell's feature sums item by item (cells of at most 64 items) or from their
normal law, and every view is computed from those sums. The intervals equal the item-level
bootstrap's up to Monte Carlo error, about 0.085 standard deviations of the statistic per endpoint
at 1,000 resamples (the same error the item-level draw has; tested at 30,000 items). A 10^6-item
comparison costs as much as one of a few hundred cells.

Shapes: every input is (n,), aligned by item; every output is (n_resamples,), NaN where a view is
undefined on that resample (dropped by :func:`~judgefuse.calibration.bootstrap.interval_from_stats`).
"""

from __future__ import annotations

import numpy as np

from .binning import equal_width_bin_index
from .bootstrap import cell_sums

__all__ = ["MAX_CELL_DRAWS", "candidate_cell_stats", "comparison_cell_stats", "mean_difference_cell_stats"]

MAX_CELL_DRAWS = 25_000_000
"""Most resamples x cells in use the cells are drawn over (the multinomial's counts: 200 MB). Past
it (many bins, e.g. ``--bins 1000`` on continuous confidences, leave few items to a cell) the
functions here return None and the caller resamples items."""

_SEED_TAG = 46
"""Mixed into every seed here, as ``eval``'s large rows mix it into theirs."""


def _cells(*keys: np.ndarray) -> np.ndarray:
    """One dense cell code per item from its small integer keys (codes in ascending key order)."""
    code = np.zeros(keys[0].size, dtype=np.int64)
    for key in keys:
        code = code * (int(key.max(initial=0)) + 1) + key
        code = np.unique(code, return_inverse=True)[1].reshape(-1)
    return code


def _too_many(cells: np.ndarray, n_resamples: int) -> bool:
    return (int(cells.max(initial=-1)) + 1) * n_resamples > MAX_CELL_DRAWS


def comparison_cell_stats(
    c1: np.ndarray,
    z1: np.ndarray,
    c2: np.ndarray,
    z2: np.ndarray,
    *,
    n_bins: int,
    n_resamples: int,
    seed: int,
) -> dict[tuple[str, str], np.ndarray] | None:
    """Bootstrap differences (judge 1 - judge 2) of ECE and Brier under the raw, instance-aligned
    and distribution-aligned views (:func:`~judgefuse.calibration.comparison.compare_judges`'s
    rules, DA weights from each resample's own accuracies), keyed ``(metric, view)``; None past
    :data:`MAX_CELL_DRAWS`."""
    n = c1.size
    b1, b2 = equal_width_bin_index(c1, n_bins), equal_width_bin_index(c2, n_bins)
    r1, r2 = (z1 > 0.5).astype(np.int64), (z2 > 0.5).astype(np.int64)
    features = np.column_stack([c1, c2, (c1 - z1) ** 2, (c2 - z2) ** 2])
    gaps = [np.zeros((n_resamples, n_bins, 2)) for _ in range(2)]  # per judge: sum of z - c by (bin, correct)
    counts = [np.zeros((n_resamples, 2)) for _ in range(2)]  # per judge: items by correct
    squares = [np.zeros((n_resamples, 2)) for _ in range(2)]  # per judge: squared errors by correct
    same_gaps = [np.zeros((n_resamples, n_bins)) for _ in range(2)]  # instance-aligned: both right or both wrong
    same_squares = [np.zeros(n_resamples) for _ in range(2)]
    same_n = np.zeros(n_resamples)
    cells = _cells(b1, r1, b2, r2)
    if _too_many(cells, n_resamples):
        return None
    rng = np.random.default_rng([seed, _SEED_TAG, 0])
    for at, m, sums in cell_sums(cells, lambda at: features[at], n_resamples, rng):
        first = int(at[0])
        same = r1[first] == r2[first]
        if same:
            same_n += m
        for j, (bins, right) in enumerate(((b1, r1), (b2, r2))):
            b, r = int(bins[first]), int(right[first])
            gap = r * m - sums[:, j]
            gaps[j][:, b, r] += gap
            counts[j][:, r] += m
            squares[j][:, r] += sums[:, 2 + j]
            if same:
                same_gaps[j][:, b] += gap
                same_squares[j] += sums[:, 2 + j]
    raw = [(np.abs(gaps[j].sum(axis=2)).sum(axis=1) / n, squares[j].sum(axis=1) / n) for j in range(2)]
    with np.errstate(invalid="ignore", divide="ignore"):
        aligned = [
            (np.abs(same_gaps[j]).sum(axis=1) / same_n, same_squares[j] / same_n) for j in range(2)
        ]  # fmt: skip
        aligned = [(np.where(same_n > 0, e, np.nan), np.where(same_n > 0, b, np.nan)) for e, b in aligned]
        accuracy = [counts[j][:, 1] / n for j in range(2)]
        weighted = [_weighted(gaps[j], counts[j], squares[j], accuracy[j], accuracy[1 - j]) for j in range(2)]
    stats: dict[tuple[str, str], np.ndarray] = {}
    for k, metric in enumerate(("ece", "brier")):
        stats[(metric, "raw")] = raw[0][k] - raw[1][k]
        stats[(metric, "instance_aligned")] = aligned[0][k] - aligned[1][k]
        stats[(metric, "distribution_aligned")] = np.select(
            [accuracy[0] > accuracy[1], accuracy[1] > accuracy[0]],
            [weighted[0][k] - raw[1][k], raw[0][k] - weighted[1][k]],
            default=raw[0][k] - raw[1][k],
        )
    return stats


def _weighted(
    gaps: np.ndarray, counts: np.ndarray, squares: np.ndarray, a_high: np.ndarray, a_low: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """ECE and Brier of the more accurate judge reweighted to the other's accuracy (used where
    ``a_high > a_low``; NaN where ``a_high`` is 1: no weighting reaches the lower accuracy)."""
    right, wrong = a_low / a_high, (1.0 - a_low) / (1.0 - a_high)
    total = right * counts[:, 1] + wrong * counts[:, 0]
    gap = right[:, None] * gaps[:, :, 1] + wrong[:, None] * gaps[:, :, 0]
    possible = a_high < 1.0
    ece = np.where(possible, np.abs(gap).sum(axis=1) / total, np.nan)
    brier = np.where(possible, (right * squares[:, 1] + wrong * squares[:, 0]) / total, np.nan)
    return ece, brier


def candidate_cell_stats(
    p_a_1: np.ndarray,
    p_a_2: np.ndarray,
    label_a: np.ndarray,
    *,
    n_bins: int,
    n_resamples: int,
    seed: int,
) -> dict[str, np.ndarray] | None:
    """Bootstrap differences (judge 1 - judge 2) of CA-ECE and CA-Brier, items resampled with both
    their candidates (``p_a`` right when A is the label, ``1 - p_a`` right when B is), keyed by
    metric; None past :data:`MAX_CELL_DRAWS`."""
    n = label_a.size
    la = label_a.astype(np.int64)
    keys = [la]
    for p in (p_a_1, p_a_2):
        keys += [equal_width_bin_index(p, n_bins), equal_width_bin_index(1.0 - p, n_bins)]
    z = label_a.astype(float)
    features = np.column_stack([p_a_1, p_a_2, (p_a_1 - z) ** 2, (p_a_2 - z) ** 2])
    gaps = [np.zeros((n_resamples, n_bins)) for _ in range(2)]
    squares = [np.zeros(n_resamples) for _ in range(2)]
    cells = _cells(*keys)
    if _too_many(cells, n_resamples):
        return None
    rng = np.random.default_rng([seed, _SEED_TAG, 1])
    for at, m, sums in cell_sums(cells, lambda at: features[at], n_resamples, rng):
        first = int(at[0])
        for j in range(2):
            gap = la[first] * m - sums[:, j]  # candidate A: z - c = label_a - p_a; candidate B: the opposite
            gaps[j][:, keys[1 + 2 * j][first]] += gap
            gaps[j][:, keys[2 + 2 * j][first]] -= gap
            squares[j] += sums[:, 2 + j]
    ece = [np.abs(gaps[j]).sum(axis=1) / (2 * n) for j in range(2)]
    brier = [squares[j] / n for j in range(2)]
    return {"ece": ece[0] - ece[1], "brier": brier[0] - brier[1]}


def mean_difference_cell_stats(first: np.ndarray, second: np.ndarray, *, n_resamples: int, seed: int) -> np.ndarray:
    """Bootstrap means of ``first - second`` (0/1 each, per item) over resamples of the items. The
    items fall into four cells with one value each, so the cell counts are the whole draw: the
    item-level bootstrap's law exactly."""
    x, y = first.astype(np.int64), second.astype(np.int64)
    values = np.column_stack([first, second]).astype(float)
    total = np.zeros((n_resamples, 2))
    rng = np.random.default_rng([seed, _SEED_TAG, 2])
    for _at, _m, sums in cell_sums(2 * x + y, lambda at: values[at], n_resamples, rng):
        total += sums
    return (total[:, 0] - total[:, 1]) / first.size
