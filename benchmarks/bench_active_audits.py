"""Active audits (confidence bands at Neyman rates) against uniform audits, at equal expected labels.

Why (issue 44; :mod:`judgefuse.calibration.audit_bands`): an audit label of a verdict whose
answer is nearly certain teaches the estimate little. This replays resampled streams of recorded
verdicts and, on the same stream, draws the audits of the auto-accepted verdicts two ways:

* ``uniform``: every auto-accepted verdict with probability ``--audit`` (the service today);
* ``active``: each verdict with its confidence band's rate, planned by
  :func:`~judgefuse.calibration.audit_bands.plan_audit_bands` on a separate labelled sample of
  ``--plan`` verdicts (what the threshold's tune had), averaging ``--audit`` over it.

One stream: ``--stream`` verdicts drawn with replacement from the pool; the pool's ``--accept``
top share of confidence is auto-accepted, the rest goes to review, of which a random
``--review-share`` is labelled (the same draw for both designs). Strata: ``review`` and one
``auto@{rate}`` per rate in force, exactly as the service's ledger keeps them. Estimators: the
service's labels-only stratified ones (``population_estimates``, ``precision_estimate``) and the
model-assisted difference estimator (``difference_mean``), both unchanged.

Printed per pool: expected audit labels per stream under each design (equal by construction,
up to the drift between the plan's sample and the pool), then per metric (auto-accept
precision, accuracy, Brier), estimator and design: coverage of the 95% interval (target >= 0.94)
and mean width; then active's width relative to uniform (issue 44's target: <= 0.6x, i.e. an
effective sample size >= 2.8x) next to the **bound** no audit probabilities can beat on that
pool's auto-accepted verdicts (:func:`~judgefuse.calibration.audit_bands.width_ratio_bound`,
from an isotonic fit of correctness on confidence over the pool). Pools: the shared
Trust-or-Escalate and JudgeBench ones, a synthetic panel (benchmarks/synthetic_panels.py,
informative confidence) and a synthetic mixture where a few verdicts hold most of the
uncertainty (the regime where such audits can pay).

Run from the repository root (data from ../shared/data or JUDGEFUSE_SHARED_DATA)::

    PYTHONPATH=benchmarks:. python benchmarks/bench_active_audits.py --streams 500
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np
from bench_review_sim import data_dir, recorded_pools
from sklearn.isotonic import IsotonicRegression
from synthetic_panels import panel

from judgefuse.calibration import CalibrationAccumulator
from judgefuse.calibration.audit_bands import AuditBands, plan_audit_bands, width_ratio_bound
from judgefuse.calibration.model_assisted import AssistedStratum, brier_pseudo_values, difference_mean
from judgefuse.calibration.stratified import StratumData, population_estimates, precision_estimate
from judgefuse.fusion.voting import mean_probability

ACC = CalibrationAccumulator()
METRICS = ("precision", "accuracy", "brier")
ESTIMATORS = ("labels-only", "model-assisted")
DESIGNS = ("uniform", "active")


def synthetic_pool(regime: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A synthetic panel (benchmarks/synthetic_panels.py) fused by mean probability."""
    conf, corr = [], []
    for item in panel(regime, n, seed):
        verdict = mean_probability(item.votes)
        conf.append(verdict.confidence)
        corr.append(verdict.choice is not None and verdict.choice == item.item.label)
    return np.asarray(conf), np.asarray(corr, dtype=float)


def mixture_pool(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Calibrated confidences where a few verdicts hold most of the uncertainty: half near
    certain (0.99-1.0), half in 0.6-0.95, each right with probability its confidence; with 60%
    auto-accepted, a sixth of them are uncertain. The regime where confidence-driven audits
    can pay (its bound is printed with it)."""
    rng = np.random.default_rng(seed)
    sure = rng.uniform(size=n) < 0.5
    c = np.where(sure, rng.uniform(0.99, 1.0, n), rng.uniform(0.6, 0.95, n))
    return c, (rng.uniform(size=n) < c).astype(float)


def _strata(auto: np.ndarray, rates: np.ndarray) -> list[tuple[str, np.ndarray]]:
    out = [("review", ~auto)]
    for r in np.unique(rates[auto]):
        out.append((f"auto@{r:g}", auto & (rates == r)))
    return out


def _assisted(
    c: np.ndarray,
    y: np.ndarray,
    f: np.ndarray,
    labelled: np.ndarray,
    strata: list[tuple[str, np.ndarray]],
    brier: bool = False,
) -> list[AssistedStratum]:
    out = []
    for name, members in strata:
        lab = members & labelled
        guard = brier_pseudo_values(float(c[lab].mean()) if lab.any() else 0.5) if brier else None
        out.append(
            AssistedStratum(
                name, int(members.sum()), float(f[members].sum()), y[lab], f[lab], np.ones(int(lab.sum())), guard
            )
        )
    return out


def estimates(
    c: np.ndarray,
    z: np.ndarray,
    labelled: np.ndarray,
    strata: list[tuple[str, np.ndarray]],
) -> dict[str, dict[str, tuple[float, float]]]:
    """{estimator: {metric: (lower, upper)}} of one stream under one design."""
    fields = [
        StratumData(name, int(m.sum()), ACC.increments_many(c[m & labelled], z[m & labelled])) for name, m in strata
    ]
    labels_only = population_estimates(fields, accumulator=ACC)
    labels_only["precision"] = precision_estimate(fields[1:], accumulator=ACC)
    auto_strata = strata[1:]
    assisted = {
        "accuracy": difference_mean(_assisted(c, z, c, labelled, strata)),
        "brier": difference_mean(_assisted(c, (c - z) ** 2, c * (1.0 - c), labelled, strata, brier=True)),
        "precision": difference_mean(_assisted(c, z, c, labelled, auto_strata)),
    }
    return {
        name: {m: (est[m].lower, est[m].upper) for m in METRICS}
        for name, est in (("labels-only", labels_only), ("model-assisted", assisted))
    }


def run_pool(name: str, pool_c: np.ndarray, pool_z: np.ndarray, args: argparse.Namespace) -> dict[str, float]:
    rng = np.random.default_rng(args.seed)
    tau = float(np.quantile(pool_c, 1.0 - args.accept))
    plan_idx = rng.integers(0, pool_c.size, args.plan)
    plan_auto = pool_c[plan_idx] >= tau
    bands: AuditBands = plan_audit_bands(
        pool_c[plan_idx][plan_auto],
        pool_z[plan_idx][plan_auto],
        mean_rate=args.audit,
        bands=args.bands,
        floor_share=args.floor_share,
        prior_strength=args.prior,
    )
    covered: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    widths: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    labels: dict[str, list[int]] = defaultdict(list)
    for _ in range(args.streams):
        idx = rng.integers(0, pool_c.size, args.stream)
        c, z = pool_c[idx], pool_z[idx]
        auto = c >= tau
        u = rng.random(c.size)
        reviewed = ~auto & (rng.random(c.size) < args.review_share)
        truth = {
            "accuracy": float(z.mean()),
            "brier": float(((c - z) ** 2).mean()),
            "precision": float(z[auto].mean()) if auto.any() else np.nan,
        }
        for design in DESIGNS:
            rates = np.where(auto, args.audit if design == "uniform" else bands.rates_of(c), 1.0)
            labelled = reviewed | (auto & (u < rates))
            labels[design].append(int((auto & labelled).sum()))
            for estimator, by_metric in estimates(c, z, labelled, _strata(auto, rates)).items():
                for metric, (lower, upper) in by_metric.items():
                    if np.isfinite(truth[metric]) and np.isfinite(lower) and np.isfinite(upper):
                        key = (metric, estimator, design)
                        covered[key].append(lower <= truth[metric] <= upper)
                        widths[key].append(upper - lower)
    auto_pool = pool_c >= tau
    p_pool = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(pool_c, pool_z).predict(pool_c)
    bound = width_ratio_bound(p_pool[auto_pool])
    print(
        f"== {name}: {pool_c.size} verdicts (accuracy {pool_z.mean():.3f}); {args.streams} streams of "
        f"{args.stream}; threshold {tau:.3f} auto-accepts {args.accept:.0%}; review labelled "
        f"{args.review_share:.0%}"
    )
    print(
        f"   plan from {args.plan} labelled verdicts ({int(plan_auto.sum())} auto-accepted): edges "
        f"{[round(e, 3) for e in bands.edges]}, rates {list(bands.rates)} (mean {args.audit:g})"
    )
    print(
        f"   audit labels per stream: uniform {np.mean(labels['uniform']):.1f}, active "
        f"{np.mean(labels['active']):.1f}; width-ratio bound on this pool's auto-accepted verdicts "
        f"{bound:.3f}"
    )
    print(
        f"   {'metric':<10} {'estimator':<15} {'design':<8} {'coverage (>= 0.94)':>19} {'streams':>8} "
        f"{'mean width':>11}"
    )
    ratios: dict[str, float] = {}
    for metric in METRICS:
        for estimator in ESTIMATORS:
            for design in DESIGNS:
                cov = covered[(metric, estimator, design)]
                print(
                    f"   {metric:<10} {estimator:<15} {design:<8} {np.mean(cov):>19.3f} {len(cov):>8d} "
                    f"{np.mean(widths[(metric, estimator, design)]):>11.4f}"
                )
            ratio = np.mean(widths[(metric, estimator, "active")]) / np.mean(widths[(metric, estimator, "uniform")])
            ratios[f"{metric}/{estimator}"] = float(ratio)
            print(
                f"   {'':<10} {estimator:<15} active width / uniform: {ratio:.3f} (target <= 0.6; bound "
                f"{bound:.3f}); effective sample size x{1 / ratio**2:.2f} (target >= 2.8)"
            )
    print(flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--stream", type=int, default=2000, help="verdicts per stream")
    parser.add_argument("--accept", type=float, default=0.6, help="share of the pool auto-accepted")
    parser.add_argument("--audit", type=float, default=0.1, help="mean audit rate of the auto-accepted")
    parser.add_argument("--review-share", type=float, default=0.3)
    parser.add_argument("--plan", type=int, default=300, help="labelled verdicts the plan is fitted on")
    parser.add_argument("--bands", type=int, default=3)
    parser.add_argument("--prior", type=float, default=10.0, help="pseudo-labels at a band's mean confidence")
    parser.add_argument("--floor-share", type=float, default=0.5, help="lowest band rate / mean rate")
    parser.add_argument("--synthetic-n", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    pools = recorded_pools(data_dir())
    pools["synthetic informative (5 judges, mean_probability)"] = synthetic_pool("informative", args.synthetic_n, 0)
    pools["synthetic mixture (half near certain, half at 0.6-0.95)"] = mixture_pool(args.synthetic_n, 0)
    print(f"bench_active_audits: {args}")
    for name, (c, z) in pools.items():
        run_pool(name, c, z, args)
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
