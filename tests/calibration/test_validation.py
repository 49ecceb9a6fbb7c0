"""Every public metric refuses bad input with a clear ValueError."""

from __future__ import annotations

import math

import numpy as np
import pytest

import judgefuse.calibration as cal

PAIR_METRICS = [
    cal.ece, cal.adaptive_ce, cal.mce, cal.brier, cal.nll, cal.ice, cal.macroce, cal.auroc,
    cal.aurc, cal.th_score, cal.summarize, cal.reliability_diagram, cal.risk_coverage_curve,
    lambda c, z: cal.bootstrap_ci(c, z, metric="ece", n_resamples=10),
]

BAD = [
    ([0.5, math.nan], [1, 0], "NaN"),
    ([0.5, 1.7], [1, 0], r"\[0, 1\]"),
    ([0.5, -0.1], [1, 0], r"\[0, 1\]"),
    ([0.5, math.inf], [1, 0], r"\[0, 1\]"),
    ([0.5, 0.6], [1, 0, 1], "same length"),
    ([], [], "empty"),
    ([0.5, 0.6], [1, 2], "0/1"),
    ([0.5, 0.6], [1, 0.5], "0/1"),
    ([0.5, 0.6], [1, math.nan], "0/1"),
    ([[0.5, 0.6]], [[1, 0]], "1-D"),
    (["a", "b"], [1, 0], "numeric"),
    ([0.5, 0.6], ["x", "y"], "0/1"),
]


@pytest.mark.parametrize("fn", PAIR_METRICS)
@pytest.mark.parametrize(("conf", "corr", "msg"), BAD)
def test_bad_input(fn, conf, corr, msg) -> None:
    with pytest.raises(ValueError, match=msg):
        fn(conf, corr)


def test_bad_n_bins() -> None:
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_bins"):
            cal.ece([0.5], [1], n_bins=bad)


def test_accepts_lists_tuples_bools_and_ints() -> None:
    a = cal.ece((0.2, 0.9), (False, True))
    b = cal.ece(np.array([0.2, 0.9], dtype=np.float32), np.array([0, 1], dtype=np.int8))
    assert a == pytest.approx(b, abs=1e-7)


def test_accuracy_validation() -> None:
    with pytest.raises(ValueError, match="empty"):
        cal.accuracy([])
    with pytest.raises(ValueError, match="0/1"):
        cal.accuracy([3])


def test_helped_harmed_validation() -> None:
    with pytest.raises(ValueError, match="same length"):
        cal.helped_harmed([1, 0], [1])


def test_capability_validation() -> None:
    with pytest.raises(ValueError, match="expected_accuracy"):
        cal.capability_brier([0.5], [1.5])
    with pytest.raises(ValueError, match="same length"):
        cal.capability_brier([0.5, 0.4], [0.5])
    with pytest.raises(ValueError, match="n_correct"):
        cal.expected_accuracy([11], 10)


def test_bootstrap_validation() -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        cal.bootstrap_ci([0.5], [1], metric="nope")
    with pytest.raises(ValueError, match="level"):
        cal.bootstrap_ci([0.5], [1], metric="ece", level=95)
    with pytest.raises(ValueError, match="n_resamples"):
        cal.bootstrap_ci([0.5], [1], metric="ece", n_resamples=0)


def test_per_category_validation() -> None:
    with pytest.raises(ValueError, match="categories"):
        cal.per_category([0.5, 0.6], [1, 0], ["a"])
    with pytest.raises(ValueError, match="unknown metrics"):
        cal.per_category([0.5], [1], ["a"], metrics=["ece", "acc"])
