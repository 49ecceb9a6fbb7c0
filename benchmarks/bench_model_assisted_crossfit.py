"""Cross-fitted learned predictions vs the confidence vs labels only, for the population estimates
(issue 28, item 2).

Why (docs/design.md, 'The review loop'): the difference estimator of
:mod:`judgefuse.calibration.model_assisted` narrows the labels-only interval by at most
``sqrt(1 - R^2)`` per stratum, and the fused confidence explains 0-13% of correctness inside a
stratum. :mod:`judgefuse.calibration.cross_fitted` learns a better prediction from every
verdict's votes (each judge's probability for the fused answer, agreement, entropy, margin, the
method's confidence, the stratum), cross-fitted over the stream's own labels (cross-PPI).

One stream: ``--stream`` items drawn WITHOUT replacement from a recorded pool (with replacement,
an item's copies would sit on both sides of the cross fit and a learner would copy its label:
a width gain that is an artefact of resampling a small pool), fused by the method; the pool's
``--accept`` quantile of confidence routes each to ``review`` or auto-accept; a random
``--review-share`` of the review stratum is labelled and each auto-accepted verdict is audited
with probability ``--audit``. Truth: the stream's own accuracy, Brier and auto-accept precision.
Four estimators on the same labels: labels-only (the service's stratified estimator), the
difference estimator with no prediction (lam 0: its small-sample guard and t quantile alone, so
the next two rows' gain over it is the prediction's), model-assisted with the confidence, and
model-assisted with the cross-fitted prediction.

Printed per pool: the within-stratum R^2 of correctness on the same model cross-fitted over the
whole pool (10 folds: what ~300-450 labels buy, a ceiling for a stream's ~110), then the within-stratum R^2 of correctness on each prediction (over the stream's
verdicts, averaged over streams; it bounds the width gain), then per metric the coverage of the
95% interval (target >= 0.94), its mean width, and its ratio to the labels-only width (target
<= 0.70).

Run from the repository root (data from ../shared/data or JUDGEFUSE_SHARED_DATA)::

    PYTHONPATH=. python benchmarks/bench_model_assisted_crossfit.py --streams 500
    PYTHONPATH=. python benchmarks/bench_model_assisted_crossfit.py --ceiling   # whole-pool R^2 only
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from bench_model_assisted import METRICS, baseline_estimates, label_stream
from bench_review_sim import data_dir

from judgefuse.calibration.cross_fitted import cross_fit, cross_fitted_strata, vote_features
from judgefuse.calibration.model_assisted import difference_mean

ESTIMATORS = ("labels-only", "no prediction", "confidence", "cross-fitted")


def pool(directory: Any, fuse: Callable[..., Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vote features, confidence, right) per item of a recorded panel fused by ``fuse``."""
    from judgefuse.evaluation.loaders import load

    rows, conf, right = [], [], []
    for it in load([directory]):
        v = fuse(it.votes)
        p = [0.5 if v.choice is None or j.p_a is None else (j.p_a if v.choice == "A" else 1.0 - j.p_a)
             for j in it.votes]
        rows.append(p)
        conf.append(v.confidence)
        right.append(float(v.choice is not None and v.choice == it.item.label))
    c = np.asarray(conf)
    return vote_features(np.asarray(rows), c), c, np.asarray(right)


def _r2(y: np.ndarray, f: np.ndarray) -> float:
    return float(np.corrcoef(y, f)[0, 1] ** 2) if y.size > 2 and np.std(y) > 0 and np.std(f) > 0 else 0.0


def one_stream(rng: np.random.Generator, x_pool: np.ndarray, c_pool: np.ndarray, z_pool: np.ndarray,
               args: argparse.Namespace, tau: float) -> tuple[dict[str, dict[str, tuple[float, float, float]]],
                                                              dict[str, float]]:
    idx = rng.choice(c_pool.size, min(args.stream, c_pool.size), replace=False)
    x, c, z = x_pool[idx], c_pool[idx], z_pool[idx]
    auto, labelled, strata = label_stream(rng, c, tau, args)
    names = np.where(auto, strata[1][0], "review")
    truth, labels_only, confidence = baseline_estimates(c, z, auto, labelled, strata)
    fit = cross_fit(x, np.where(labelled, z, 0.0), labelled, names, folds=args.folds, strength=args.strength,
                    seed=int(rng.integers(1 << 31)))
    learned = cross_fitted_strata(fit, z, c, labelled, strata)
    crossed, unassisted = ({
        "accuracy": difference_mean(learned["accuracy"], lam=lam),
        "brier": difference_mean(learned["brier"], lam=lam),
        "precision": difference_mean(learned["accuracy"][1:], lam=lam),
    } for lam in (None, 0.0))
    out = {metric: {name: (float(truth[metric]), est[metric].lower, est[metric].upper)
                    for name, est in zip(ESTIMATORS, (labels_only, unassisted, confidence, crossed), strict=True)}
           for metric in METRICS}
    r2 = {f"{which} {s}": _r2(z[m], f[m]) for s, m in (("review", ~auto), ("auto", auto))
          for which, f in (("confidence", c), ("cross-fitted", fit.prediction))}
    return out, r2


def ceiling(name: str, x: np.ndarray, c: np.ndarray, z: np.ndarray, args: argparse.Namespace) -> None:
    """Within-stratum R^2 of correctness on predictors cross-fitted over the WHOLE pool (10
    folds): the logistic model of :func:`cross_fit` and gradient-boosted trees, a ceiling for
    what a window's fewer labels can learn from these votes."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold

    auto = c >= float(np.quantile(c, 1.0 - args.accept))
    names = np.where(auto, "auto", "review")
    logistic = cross_fit(x, z, np.ones(c.size, dtype=bool), names, folds=10, strength=args.strength,
                         seed=args.seed).prediction
    boosted = np.empty(c.size)
    xs = np.column_stack([x, auto])
    for train, test in StratifiedKFold(10, shuffle=True, random_state=args.seed).split(xs, z):
        model = HistGradientBoostingClassifier(max_depth=3, max_iter=100, learning_rate=0.05, random_state=0)
        boosted[test] = model.fit(xs[train], z[train]).predict_proba(xs[test])[:, 1]
    print(f"{name}: whole pool, 10 folds ({c.size * 9 // 10} training labels), R^2 within strata review / auto: "
          + "; ".join(f"{label} {_r2(z[~auto], f[~auto]):.3f} / {_r2(z[auto], f[auto]):.3f}"
                      for label, f in (("confidence", c), ("logistic", logistic), ("boosted trees", boosted))),
          flush=True)


def run_pool(name: str, x: np.ndarray, c: np.ndarray, z: np.ndarray, args: argparse.Namespace) -> None:
    rng = np.random.default_rng(args.seed)
    tau = float(np.quantile(c, 1.0 - args.accept))
    covered: dict[tuple[str, str], list[bool]] = {}
    widths: dict[tuple[str, str], list[float]] = {}
    r2s: dict[str, list[float]] = {}
    for _ in range(args.streams):
        result, r2 = one_stream(rng, x, c, z, args, tau)
        for key, value in r2.items():
            r2s.setdefault(key, []).append(value)
        for metric, by_estimator in result.items():
            for estimator, (truth, lower, upper) in by_estimator.items():
                if not (np.isfinite(truth) and np.isfinite(lower) and np.isfinite(upper)):
                    continue
                covered.setdefault((metric, estimator), []).append(lower <= truth <= upper)
                widths.setdefault((metric, estimator), []).append(upper - lower)
    stream = min(args.stream, c.size)
    expected = stream * (args.accept * args.audit + (1 - args.accept) * args.review_share)
    print(f"== {name}: {c.size} items, {x.shape[1]} features (accuracy {z.mean():.3f}); {args.streams} streams of "
          f"{stream} verdicts without replacement, threshold {tau:.3f} auto-accepts {args.accept:.0%}, audit "
          f"{args.audit:g}, review labelled {args.review_share:.0%} (~{expected:.0f} labels per stream); "
          f"{args.folds}-fold cross fit, C {args.strength:g}")
    whole = cross_fit(x, z, np.ones(c.size, dtype=bool), np.where(c >= tau, "auto", "review"), folds=10,
                      strength=args.strength, seed=args.seed).prediction
    print(f"   the same model cross-fitted on the WHOLE pool (10 folds, {c.size * 9 // 10} training labels): R^2 "
          f"within strata review {_r2(z[c < tau], whole[c < tau]):.3f}, auto {_r2(z[c >= tau], whole[c >= tau]):.3f}")
    for which in ("confidence", "cross-fitted"):
        rev, aut = np.mean(r2s[f"{which} review"]), np.mean(r2s[f"{which} auto"])
        print(f"   R^2 of correctness on the {which} prediction within strata (mean over streams): review "
              f"{rev:.3f}, auto {aut:.3f}; best width ratio sqrt(1 - R^2): {np.sqrt(1 - max(rev, aut)):.2f}")
    print(f"{'metric':<10} {'estimator':<13} {'coverage (>= 0.94)':>19} {'streams':>8} {'mean width':>11} "
          f"{'vs labels-only (<= 0.70)':>25}")
    for metric in METRICS:
        base = np.mean(widths[(metric, "labels-only")])
        for estimator in ESTIMATORS:
            cov, w = covered[(metric, estimator)], np.mean(widths[(metric, estimator)])
            print(f"{metric:<10} {estimator:<13} {np.mean(cov):>19.3f} {len(cov):>8d} {w:>11.4f} {w / base:>25.2f}")
    print(flush=True)


POOLS: dict[str, tuple[str, str]] = {
    "toe": ("Trust-or-Escalate, 3 judges", "trust_or_escalate"),
    "judgebench": ("JudgeBench GPT-4o, 10 judges", "judgebench"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--stream", type=int, default=265, help="verdicts per stream (at most the pool)")
    parser.add_argument("--accept", type=float, default=0.6, help="share of the pool above the threshold")
    parser.add_argument("--audit", type=float, default=0.3)
    parser.add_argument("--review-share", type=float, default=0.6)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--strength", type=float, default=0.5, help="inverse L2 penalty of the logistic model")
    parser.add_argument("--pools", default="toe,judgebench")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ceiling", action="store_true",
                        help="only the whole-pool R^2 of the logistic model and of boosted trees")
    args = parser.parse_args()
    from judgefuse.fusion.voting import majority, mean_probability

    started = time.perf_counter()
    root = data_dir()
    for key in args.pools.split(","):
        label, folder = POOLS[key]
        for fuse in (mean_probability, majority):
            (ceiling if args.ceiling else run_pool)(f"{label}, {fuse.__name__}", *pool(root / folder, fuse), args)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
