"""Model-assisted population estimates vs the labels-only stratified ones (issue 28, item 2).

Why (docs/design.md, 'The review loop'): every verdict carries a fused confidence that predicts
whether it is right; the labels-only stratified estimator ignores it for the unlabelled
verdicts. :func:`judgefuse.calibration.model_assisted.difference_mean` uses it as the
prediction and the labels as the correction. This checks its 95% intervals on resampled streams
and compares their width with the labels-only estimator's on the same labels.

One stream: ``--stream`` verdicts drawn with replacement from a recorded pool (confidence of the
fused answer, right or wrong); a fixed threshold (the pool's ``--accept`` quantile of
confidence) routes each to ``review`` (below) or auto-accept (above); a random
``--review-share`` of the review stratum is labelled (annotators rarely finish a queue; the
queue is served in random order) and each auto-accepted verdict is audited with probability
``--audit``. Truth: the stream's own accuracy, Brier and auto-accept precision (the window's
finite population). Both estimators get the same labels; the labels-only one is
:func:`judgefuse.calibration.stratified.population_estimates` / ``precision_estimate``
(the service's), fed the accumulator fields of the labels.

Printed per pool and metric: coverage of the 95% interval (target >= 0.94), its mean width, and
how the model-assisted interval's width compares (target: 30% narrower). Before them, per pool
and metric, the R^2 of the outcome on the prediction within each stratum: a difference
estimator's variance is at best ``(1 - R^2)`` times the labels-only one, so this bounds the
width it can save on that pool.

Run from the repository root (data from ../shared/data or JUDGEFUSE_SHARED_DATA)::

    PYTHONPATH=. python benchmarks/bench_model_assisted.py --streams 500
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from bench_review_sim import data_dir, recorded_pools

from judgefuse.calibration import CalibrationAccumulator
from judgefuse.calibration.model_assisted import AssistedStratum, brier_pseudo_values, difference_mean
from judgefuse.calibration.stratified import StratumData, population_estimates, precision_estimate

ACC = CalibrationAccumulator()
METRICS = ("accuracy", "brier", "precision")


def _assisted(c: np.ndarray, y: np.ndarray, f: np.ndarray, labelled: np.ndarray,
              strata: list[tuple[str, np.ndarray]], brier: bool = False) -> list[AssistedStratum]:
    out = []
    for name, members in strata:
        lab = members & labelled
        guard = brier_pseudo_values(float(c[lab].mean()) if lab.any() else 0.5) if brier else None
        out.append(AssistedStratum(name, int(members.sum()), float(f[members].sum()), y[lab], f[lab],
                                   np.ones(int(lab.sum())), guard))
    return out


def label_stream(rng: np.random.Generator, c: np.ndarray, tau: float, args: argparse.Namespace,
                 ) -> tuple[np.ndarray, np.ndarray, list[tuple[str, np.ndarray]]]:
    """Route one stream at ``tau`` and draw its labels: (auto-accepted, labelled, strata)."""
    auto = c >= tau
    labelled = np.where(auto, rng.random(c.size) < args.audit, rng.random(c.size) < args.review_share)
    return auto, labelled, [("review", ~auto), (f"auto@{args.audit:g}", auto)]


def baseline_estimates(c: np.ndarray, z: np.ndarray, auto: np.ndarray, labelled: np.ndarray,
                       strata: list[tuple[str, np.ndarray]]) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """(truth, labels-only estimates, estimates assisted by the confidence) of one stream."""
    fields = [StratumData(name, int(m.sum()), ACC.increments_many(c[m & labelled], z[m & labelled]))
              for name, m in strata]
    labels_only = population_estimates(fields, accumulator=ACC)
    labels_only["precision"] = precision_estimate(fields[1:], accumulator=ACC)
    brier_y, brier_f = (c - z) ** 2, c * (1.0 - c)
    assisted = {
        "accuracy": difference_mean(_assisted(c, z, c, labelled, strata)),
        "brier": difference_mean(_assisted(c, brier_y, brier_f, labelled, strata, brier=True)),
        "precision": difference_mean(_assisted(c, z, c, labelled, strata[1:])),
    }
    truth = {"accuracy": float(z.mean()), "brier": float(brier_y.mean()),
             "precision": float(z[auto].mean()) if auto.any() else np.nan}
    return truth, labels_only, assisted


def one_stream(rng: np.random.Generator, pool_c: np.ndarray, pool_z: np.ndarray, args: argparse.Namespace,
               tau: float) -> dict[str, dict[str, tuple[float, float, float]]]:
    """{metric: {estimator: (truth, lower, upper)}} for one resampled stream."""
    idx = rng.integers(0, pool_c.size, args.stream)
    c, z = pool_c[idx], pool_z[idx]
    auto, labelled, strata = label_stream(rng, c, tau, args)
    truth, labels_only, assisted = baseline_estimates(c, z, auto, labelled, strata)
    out: dict[str, dict[str, tuple[float, float, float]]] = {}
    for metric in METRICS:
        out[metric] = {name: (float(truth[metric]), est[metric].lower, est[metric].upper)
                       for name, est in (("labels-only", labels_only), ("model-assisted", assisted))}
    return out


def run_pool(name: str, pool_c: np.ndarray, pool_z: np.ndarray, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    tau = float(np.quantile(pool_c, 1.0 - args.accept))
    covered: dict[tuple[str, str], list[bool]] = {}
    widths: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.streams):
        result = one_stream(rng, pool_c, pool_z, args, tau)
        for metric, by_estimator in result.items():
            for estimator, (truth, lower, upper) in by_estimator.items():
                if not (np.isfinite(truth) and np.isfinite(lower) and np.isfinite(upper)):
                    continue
                covered.setdefault((metric, estimator), []).append(lower <= truth <= upper)
                widths.setdefault((metric, estimator), []).append(upper - lower)
    expected_labels = args.stream * (args.accept * args.audit + (1 - args.accept) * args.review_share)
    print(f"== {name}: {pool_c.size} items (accuracy {pool_z.mean():.3f}); {args.streams} streams of {args.stream} "
          f"verdicts, threshold {tau:.3f} auto-accepts {args.accept:.0%}, audit {args.audit:g}, review labelled "
          f"{args.review_share:.0%} (~{expected_labels:.0f} labels per stream)")
    auto = pool_c >= tau
    for metric, y, f in (("accuracy", pool_z, pool_c), ("brier", (pool_c - pool_z) ** 2, pool_c * (1 - pool_c))):
        r2 = {s: float(np.corrcoef(y[m], f[m])[0, 1] ** 2) if np.std(f[m]) > 0 and np.std(y[m]) > 0 else 0.0
              for s, m in (("review", ~auto), ("auto", auto))}
        print(f"   {metric}: R^2 of the outcome on the prediction within strata (pool): review {r2['review']:.3f}, "
              f"auto {r2['auto']:.3f}; the largest width gain a difference estimator can give is "
              f"{100 * (1 - (1 - max(r2.values())) ** 0.5):.0f}%")
    print(f"{'metric':<10} {'estimator':<15} {'coverage (>= 0.94)':>19} {'streams':>8} {'mean width':>11}")
    for metric in METRICS:
        for estimator in ("labels-only", "model-assisted"):
            cov = covered[(metric, estimator)]
            print(f"{metric:<10} {estimator:<15} {np.mean(cov):>19.3f} {len(cov):>8d} "
                  f"{np.mean(widths[(metric, estimator)]):>11.4f}")
        change = np.mean(widths[(metric, "model-assisted")]) / np.mean(widths[(metric, "labels-only")]) - 1
        print(f"{'':<10} model-assisted width vs labels-only: {100 * change:+.1f}% (target <= -30%)")
    print(flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--stream", type=int, default=1000, help="verdicts per stream")
    parser.add_argument("--accept", type=float, default=0.6, help="share of the pool above the threshold")
    parser.add_argument("--audit", type=float, default=0.1)
    parser.add_argument("--review-share", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    pools = recorded_pools(data_dir())
    for name, (c, z) in pools.items():
        run_pool(name, c, z, args)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
