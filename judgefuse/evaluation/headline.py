"""The report's headline: the best judge, the best method, and what fusion gained, with intervals.

A reader opening a report wants three answers before any table: which single judge is best,
which fusion method is best, and whether fusing was worth it. "Best" is by accuracy (ties: lower
ECE); the best-calibrated method (lowest ECE) is named too when it is another one. The gain is
the best method minus the best judge on the items both scored, with a paired bootstrap interval
(items resampled jointly; the hull interval of :mod:`judgefuse.calibration.bootstrap`), so a
gain that resampling can erase is visibly one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from judgefuse import calibration
from judgefuse.calibration.bootstrap import BootstrapInterval, interval_from_stats
from judgefuse.evaluation.runner import Evaluation, RowReport


@dataclass(frozen=True)
class Headline:
    """What the top of a report says; ``None`` parts when there is no judge or no method row."""

    best_judge: RowReport | None
    best_method: RowReport | None
    best_calibrated: RowReport | None
    accuracy_gain: BootstrapInterval | None
    ece_change: BootstrapInterval | None
    n_common: int


def _best(rows: list[RowReport], key) -> RowReport | None:  # noqa: ANN001 - a sort key
    return min(rows, key=key) if rows else None


def headline(evaluation: Evaluation, *, n_resamples: int = 1000, seed: int = 0) -> Headline:
    """The headline of ``evaluation`` (see the module docstring)."""
    judges = [r for r in evaluation.rows if r.row.kind == "judge" and r.row.correct.size]
    methods = [r for r in evaluation.rows if r.row.kind == "fusion" and r.row.correct.size]
    by_accuracy = lambda r: (-r.metrics["accuracy"], r.metrics["ece"])  # noqa: E731
    best_judge, best_method = _best(judges, by_accuracy), _best(methods, by_accuracy)
    best_calibrated = _best(methods, lambda r: (r.metrics["ece"], -r.metrics["accuracy"]))
    if best_judge is None or best_method is None:
        return Headline(best_judge, best_method, best_calibrated, None, None, 0)
    _, in_j, in_m = np.intersect1d(best_judge.row.item_index, best_method.row.item_index, return_indices=True)
    cj, zj = best_judge.row.confidence[in_j], best_judge.row.correct[in_j].astype(float)
    cm, zm = best_method.row.confidence[in_m], best_method.row.correct[in_m].astype(float)
    n = in_j.size
    if n == 0:
        return Headline(best_judge, best_method, best_calibrated, None, None, 0)
    n_bins = evaluation.options.n_bins
    rng = np.random.default_rng(seed)
    acc_stats, ece_stats = np.empty(n_resamples), np.empty(n_resamples)
    for b in range(n_resamples):
        idx = rng.integers(0, n, size=n)
        acc_stats[b] = zm[idx].mean() - zj[idx].mean()
        ece_stats[b] = calibration.ece(cm[idx], zm[idx], n_bins=n_bins) - calibration.ece(cj[idx], zj[idx], n_bins=n_bins)
    acc = interval_from_stats(float(zm.mean() - zj.mean()), acc_stats, bounds=(-1.0, 1.0))
    ece = interval_from_stats(
        calibration.ece(cm, zm, n_bins=n_bins) - calibration.ece(cj, zj, n_bins=n_bins), ece_stats, bounds=(-1.0, 1.0)
    )
    return Headline(best_judge, best_method, best_calibrated, acc, ece, n)


def excludes_zero(interval: BootstrapInterval) -> bool:
    """The interval lies wholly on one side of 0."""
    return interval.low > 0.0 or interval.high < 0.0
