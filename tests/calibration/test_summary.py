"""summarize, per_category, reliability_diagram, capability calibration; invariances."""

from __future__ import annotations

import math

import numpy as np
import pytest

import judgefuse.calibration as cal

KEYS = {"n", "accuracy", "ece", "adaptive_ce", "mce", "brier", "nll", "ice", "th_score",
        "macroce", "auroc", "aurc"}


def _judge(n: int = 500, seed: int = 0):
    rng = np.random.default_rng(seed)
    c = np.round(rng.uniform(0.3, 1.0, n), 2)  # ties and values on bin edges
    c[:4] = [0.0, 1.0, 0.1, 0.9]
    z = (rng.uniform(size=n) < c).astype(int)
    return c, z


def test_summary_keys_and_agreement_with_single_metrics() -> None:
    c, z = _judge()
    s = cal.summarize(c, z, n_bins=15, eps=0.05)
    assert set(s) == KEYS and all(isinstance(v, float) for v in s.values())
    assert s["n"] == 500.0
    assert s["accuracy"] == cal.accuracy(z)
    assert s["ece"] == pytest.approx(cal.ece(c, z, n_bins=15))
    assert s["adaptive_ce"] == pytest.approx(cal.adaptive_ce(c, z, n_bins=15))
    assert s["mce"] == pytest.approx(cal.mce(c, z, n_bins=15))
    assert s["brier"] == pytest.approx(cal.brier(c, z))
    assert s["nll"] == pytest.approx(cal.nll(c, z))
    assert s["ice"] == pytest.approx(cal.ice(c, z))
    assert s["th_score"] == pytest.approx(cal.th_score(c, z, eps=0.05).score)
    assert s["macroce"] == pytest.approx(cal.macroce(c, z))
    assert s["auroc"] == pytest.approx(cal.auroc(c, z))
    assert s["aurc"] == pytest.approx(cal.aurc(c, z))


def test_permutation_invariance() -> None:
    c, z = _judge()
    base = cal.summarize(c, z)
    rel = [b.as_dict() for b in cal.reliability_diagram(c, z)]
    for seed in range(3):
        p = np.random.default_rng(seed).permutation(c.size)
        other = cal.summarize(c[p], z[p])
        for key in KEYS:
            assert other[key] == pytest.approx(base[key], abs=1e-12), key
        for got, want in zip(cal.reliability_diagram(c[p], z[p]), rel, strict=True):
            assert got.as_dict() == pytest.approx(want)
        assert cal.th_score(c[p], z[p]) == cal.th_score(c, z)


@pytest.mark.parametrize(
    ("conf", "corr"),
    [([0.7], [1]), ([0.0, 1.0], [0, 0]), ([1.0] * 3, [1] * 3), ([0.5] * 4, [0, 1, 0, 1])],
)
def test_degenerate_inputs_no_warnings(conf, corr) -> None:
    # filterwarnings=error: any numpy RuntimeWarning here fails the test
    s = cal.summarize(conf, corr)
    for key in KEYS - {"auroc"}:
        assert math.isfinite(s[key]), key
    single_class = len(set(corr)) == 1
    assert math.isnan(s["auroc"]) == single_class


def test_all_correct_confident_is_perfect() -> None:
    s = cal.summarize([1.0] * 5, [1] * 5)
    assert s["ece"] == s["mce"] == s["brier"] == s["ice"] == s["macroce"] == s["aurc"] == 0.0
    assert s["adaptive_ce"] == 0.0
    assert s["nll"] == pytest.approx(1e-12, abs=1e-15)


def test_reliability_diagram_bins() -> None:
    bins = cal.reliability_diagram([0.05, 0.15, 0.15, 1.0], [0, 1, 0, 1], n_bins=10)
    assert len(bins) == 10 and [b.index for b in bins] == list(range(10))
    b1 = bins[1]
    assert (b1.lower, b1.upper, b1.centre, b1.count) == (0.1, 0.2, pytest.approx(0.15), 2)
    assert b1.accuracy == 0.5 and b1.mean_confidence == pytest.approx(0.15)
    assert b1.gap == pytest.approx(0.35)
    empty = bins[5]
    assert empty.count == 0 and math.isnan(empty.accuracy) and math.isnan(empty.mean_confidence)
    assert empty.as_dict()["accuracy"] is None and empty.as_dict()["gap"] is None
    assert bins[9].count == 1 and bins[9].upper == 1.0
    # the diagram's weighted gaps are the ECE
    c, z = _judge()
    rel = cal.reliability_diagram(c, z)
    assert sum(b.count * abs(b.gap) for b in rel if b.count) / c.size == pytest.approx(cal.ece(c, z))


def test_per_category() -> None:
    c, z = _judge(400)
    cats = np.array(["math", "coding", "knowledge", "reasoning"] * 100)
    out = cal.per_category(c, z, cats)
    assert list(out) == ["coding", "knowledge", "math", "reasoning"]
    for name, summary in out.items():
        mask = cats == name
        assert summary == pytest.approx(cal.summarize(c[mask], z[mask]), nan_ok=True)
    few = cal.per_category(c, z, cats, metrics=["n", "ece"])
    assert set(few["math"]) == {"n", "ece"} and few["math"]["n"] == 100.0
    # a one-item, one-class category works (auroc NaN) and no warning is raised
    one = cal.per_category([0.9, 0.8, 0.7], [1, 0, 1], ["a", "b", "b"])
    assert math.isnan(one["a"]["auroc"]) and one["b"]["auroc"] == 0.0


def test_capability_brier_and_random_baseline() -> None:
    mu = cal.expected_accuracy([10, 5, 0, 7], 10)
    np.testing.assert_allclose(mu, [1.0, 0.5, 0.0, 0.7])
    c = [0.9, 0.5, 0.2, 0.7]
    assert cal.capability_brier(c, mu) == pytest.approx((0.01 + 0 + 0.04 + 0) / 4)
    # "From Response To Capability", eq. 11: E_s~U(0,1)[(s - mu)^2] = 1/3 - mu + mu^2
    expected = np.mean([1 / 3 - m + m**2 for m in mu])
    assert cal.capability_random_baseline(mu) == pytest.approx(expected)
    # and it really is the expected Brier of uniform confidences (Monte Carlo check)
    s = np.random.default_rng(0).uniform(size=(200_000, 1))
    mc = np.mean((s - mu[None, :]) ** 2)
    assert mc == pytest.approx(expected, abs=2e-3)
