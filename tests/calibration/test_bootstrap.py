"""Bootstrap intervals: contain the estimate, narrow with n, vectorised == loop, fast enough."""

from __future__ import annotations

import time

import numpy as np
import pytest

import judgefuse.calibration as cal


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
