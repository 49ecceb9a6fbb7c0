"""Bootstrap intervals: contain the estimate, narrow with n, vectorised == loop, fast enough."""

from __future__ import annotations

import time

import numpy as np
import pytest

import judgefuse.calibration as cal
from judgefuse.calibration.bootstrap import bootstrap_interval


def _judge(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.5, 1.0, n)
    z = (rng.uniform(size=n) < c - 0.1).astype(int)
    return c, z


POINT = {
    "accuracy": lambda c, z: cal.accuracy(z),
    "ece": cal.ece,
    "mce": cal.mce,
    "adaptive_ce": cal.adaptive_ce,
    "brier": cal.brier,
    "nll": cal.nll,
    "ice": cal.ice,
    "macroce": cal.macroce,
    "th_score": lambda c, z: cal.th_score(c, z).score,
    "auroc": cal.auroc,
    "aurc": cal.aurc,
}


@pytest.mark.parametrize("metric", sorted(POINT))
def test_named_metric_equals_callable_on_same_resamples(metric: str) -> None:
    c, z = _judge(120)
    named = cal.bootstrap_ci(c, z, metric=metric, n_resamples=200, seed=3)
    by_fn = cal.bootstrap_ci(c, z, metric=POINT[metric], n_resamples=200, seed=3)
    assert named == pytest.approx(by_fn, abs=1e-9)


@pytest.mark.parametrize("metric", ["accuracy", "ece", "th_score", "brier", "auroc", "macroce"])
def test_contains_point_estimate_and_narrows(metric: str) -> None:
    widths = []
    for n in (100, 3000):
        c, z = _judge(n, seed=n)
        low, high = cal.bootstrap_ci(c, z, metric=metric, n_resamples=500)
        assert low <= POINT[metric](c, z) <= high
        widths.append(high - low)
    assert widths[1] < widths[0] / 2


def test_deterministic_and_level() -> None:
    c, z = _judge(200)
    a = cal.bootstrap_ci(c, z, metric="ece", seed=7)
    assert a == cal.bootstrap_ci(c, z, metric="ece", seed=7)
    lo90, hi90 = cal.bootstrap_ci(c, z, metric="ece", seed=7, level=0.9)
    assert a[0] <= lo90 and hi90 <= a[1]


def test_one_class_auroc_resamples_dropped() -> None:
    # 1 wrong item out of 30: many resamples miss it and have no AUROC
    c = np.linspace(0.5, 1.0, 30)
    z = np.ones(30, dtype=int)
    z[0] = 0
    low, high = cal.bootstrap_ci(c, z, metric="auroc", n_resamples=200)
    assert 0.0 <= low <= high <= 1.0
    assert all(np.isnan(cal.bootstrap_ci(c, np.ones(30), metric="auroc", n_resamples=20)))


def test_fast_enough_for_reports() -> None:
    """The report calls ~20 rows x 3 metrics; each call must stay well under ~50 ms."""
    c, z = _judge(350)
    cal.bootstrap_ci(c, z, metric="accuracy")  # warm-up
    start = time.perf_counter()
    for metric in ("accuracy", "ece", "th_score"):
        for _ in range(3):
            cal.bootstrap_ci(c, z, metric=metric)
    per_call = (time.perf_counter() - start) / 9
    assert per_call < 0.1  # generous: ~15-35 ms measured on the 2-core machine


# ------------------------------------------------------------------ intervals that contain their estimate


@pytest.mark.parametrize("metric", sorted(POINT))
def test_interval_estimate_is_the_metric_and_lies_inside(metric: str) -> None:
    for n, seed in ((40, 1), (300, 2)):
        c, z = _judge(n, seed=seed)
        result = bootstrap_interval(c, z, metric=metric, n_resamples=300, seed=seed)
        assert result.estimate == pytest.approx(POINT[metric](c, z), abs=1e-9)
        assert result.low <= result.estimate <= result.high
        low, high = cal.bootstrap_ci(c, z, metric=metric, n_resamples=300, seed=seed)
        assert result.low <= low and high <= result.high  # the hull holds the percentile interval


def test_calibrated_judge_ece_percentile_misses_the_estimate_hull_does_not() -> None:
    """A judge calibrated exactly: plug-in ECE 0 and every bootstrap ECE above it."""
    c = np.repeat([0.6, 0.7, 0.8, 0.9], 100)
    z = np.concatenate([(np.arange(100) < k).astype(int) for k in (60, 70, 80, 90)])
    low, _high = cal.bootstrap_ci(c, z, metric="ece", n_resamples=400)
    result = bootstrap_interval(c, z, metric="ece", n_resamples=400)
    assert cal.ece(c, z) == pytest.approx(0.0, abs=1e-12) and low > 0.0  # the failure this interval exists for
    assert result.low == 0.0 <= result.estimate <= result.high and result.debiased == 0.0


def _coverage(gap: float, n: int, runs: int, seed: int) -> tuple[float, float]:
    """How often the true ECE (a constant gap in every bin) lies in the percentile / hull interval."""
    rng = np.random.default_rng(seed)
    percentile = hull = 0
    for run in range(runs):
        c = rng.uniform(0.55, 0.95, n)
        z = (rng.uniform(size=c.size) < c - gap).astype(int)
        result = bootstrap_interval(c, z, metric="ece", n_resamples=200, seed=run)
        low, high = cal.bootstrap_ci(c, z, metric="ece", n_resamples=200, seed=run)
        hull += result.low <= gap <= result.high
        percentile += low <= gap <= high
    return percentile / runs, hull / runs


@pytest.mark.parametrize(("gap", "floor"), [(0.05, 0.90), (0.0, 0.6)])
def test_hull_covers_the_true_ece_at_least_as_often(gap: float, floor: float) -> None:
    percentile, hull = _coverage(gap, 400, 150, seed=11)
    print(f"true ECE {gap}: coverage percentile {percentile:.3f}, hull {hull:.3f} (target 0.95)")
    assert hull >= percentile and hull >= floor
