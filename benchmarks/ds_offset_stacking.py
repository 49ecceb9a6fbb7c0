"""Experiment (issue 43, "Dawid-Skene's posterior is a candidate offset for offset stacking"):
offset stacking started at ``dawid_skene``'s posterior instead of ``mean_probability``'s, on the
synthetic regimes (benchmarks/synthetic_panels.py), cross-fitted like ``judgefuse eval``.

Rows, per regime, size and fold seed (data seed 0, 5 stratified folds as eval's):

* ``dawid_skene``: EM on every item's votes (label-free, as eval's row);
* ``offset_stacked``: the shipped method (offset: the log-odds of ``mean_probability``);
* ``ds_offset_stacked``: the same fit (features, penalty search, standard-error rule:
  :func:`~judgefuse.fusion.columnar_stacking.fit_offset`) with the offset the log-odds of
  ``dawid_skene``'s P(A) (clipped like every log-odds to [1e-4, 1 - 1e-4]); Dawid-Skene fitted
  on every item's votes, which use no label;
* each ``+platt``: its out-of-fold confidences recalibrated by Platt scaling fitted on the other
  folds' (as ``auto`` scores a recalibrated candidate).

Accuracy and ECE (10 equal-width bins) of the out-of-fold verdicts, the mean over fold seeds.

    python benchmarks/ds_offset_stacking.py [--sizes 1000] [--fold-seeds 0 1 2] [--regimes ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

sys.path.insert(0, str(Path(__file__).resolve().parent))
import synthetic_panels  # noqa: E402

from judgefuse.calibration.recalibration import make_recalibrator  # noqa: E402
from judgefuse.calibration.scores import ece  # noqa: E402
from judgefuse.fusion.columnar import VoteColumns  # noqa: E402
from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns  # noqa: E402
from judgefuse.fusion.columnar_stacking import (  # noqa: E402
    StackingColumns,
    StackingModel,
    cross_fit_stacking,
    fit_offset,
)
from judgefuse.fusion.crossfit import folds_of  # noqa: E402
from judgefuse.fusion.dawid_skene import DawidSkeneFusion  # noqa: E402
from judgefuse.fusion.offset_stacking import sigmoid  # noqa: E402
from judgefuse.fusion.stacking import P_CLIP, row_dot  # noqa: E402

ROWS = ("dawid_skene", "offset_stacked", "ds_offset_stacked")


def logit(p: np.ndarray) -> np.ndarray:
    q = np.clip(p, P_CLIP, 1.0 - P_CLIP)
    return np.asarray(np.log(q) - np.log1p(-q), dtype=float)


def offset_cross_fit(table: StackingColumns, offset: np.ndarray, label_a: np.ndarray, folds: list) -> np.ndarray:
    """Out-of-fold P(A) of offset stacking with ``offset`` as the starting log-odds."""
    p_a = np.empty(label_a.size)
    for test in folds:
        train = np.ones(label_a.size, dtype=bool)
        train[test] = False
        rows = np.flatnonzero(train)
        judges, keys = table.seen(rows, True)
        frozen = StackingModel(judges, keys, np.zeros(len(keys)), np.ones(len(keys)), np.zeros(0), 0.0)
        design = np.column_stack([offset[rows], table.matrix(rows, frozen)])
        _, beta = fit_offset(design, label_a[rows].astype(float))
        x = table.matrix(test, frozen)
        p_a[test] = sigmoid((1.0 + beta[1]) * offset[test] + beta[0] + row_dot(x, beta[2:]))
    return p_a


def platt_cross_fit(p_a: np.ndarray, label_a: np.ndarray, folds: list) -> np.ndarray:
    """Each fold's confidences mapped by Platt scaling fitted on the other folds' (confidence, correct)."""
    choice_a = p_a >= 0.5
    confidence = np.maximum(p_a, 1.0 - p_a)
    correct = (choice_a == label_a).astype(float)
    out = p_a.copy()
    for test in folds:
        train = np.ones(label_a.size, dtype=bool)
        train[test] = False
        mapped = np.clip(make_recalibrator("platt").fit(confidence[train], correct[train]).transform(confidence[test]), 0, 1)
        out[test] = np.where(choice_a[test], mapped, 1.0 - mapped)
    return out


def scores(p_a: np.ndarray, label_a: np.ndarray) -> tuple[float, float]:
    """(accuracy, ECE) of verdicts with P(A) ``p_a`` (an exact 0.5 counts half, as eval scores a tie)."""
    right = np.where(p_a == 0.5, 0.5, ((p_a > 0.5) == label_a).astype(float))
    confidence = np.maximum(p_a, 1.0 - p_a)
    return float(right.mean()), float(ece(confidence, ((p_a > 0.5) == label_a).astype(float), n_bins=10))


def run(regime: str, n: int, fold_seed: int) -> dict[str, tuple[float, float]]:
    items = synthetic_panels.panel(regime, n)
    batches = [list(judged.votes) for judged in items]
    label_a = np.asarray([judged.item.label == "A" for judged in items], dtype=bool)
    columns = VoteColumns.from_batches(batches)
    table = StackingColumns.of(columns)
    folds = folds_of(label_a, n_folds=5, seed=fold_seed)
    ds = dawid_skene_columns(DawidSkeneFusion(), columns).p_a
    found = {
        "dawid_skene": ds,
        "offset_stacked": cross_fit_stacking("offset_stacked", columns, label_a, n_folds=5, seed=fold_seed).p_a,
        "ds_offset_stacked": offset_cross_fit(table, logit(ds), label_a, folds),
    }
    out = {}
    for name, p_a in found.items():
        out[name] = scores(p_a, label_a)
        out[f"{name}+platt"] = scores(platt_cross_fit(p_a, label_a, folds), label_a)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--fold-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--regimes", nargs="+", default=list(synthetic_panels.REGIMES))
    args = parser.parse_args()
    print("| regime | labels | row | accuracy % | ECE % |")
    print("|---|---|---|---|---|")
    with threadpool_limits(1):
        for n in args.sizes:
            for regime in args.regimes:
                runs = [run(regime, n, seed) for seed in args.fold_seeds]
                for name in runs[0]:
                    acc = np.mean([r[name][0] for r in runs])
                    cal = np.mean([r[name][1] for r in runs])
                    print(f"| {regime} | {n:,} | {name} | {100 * acc:.2f} | {100 * cal:.2f} |", flush=True)


if __name__ == "__main__":
    main()
