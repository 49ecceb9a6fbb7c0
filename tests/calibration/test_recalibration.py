"""Recalibrators: validation, known-temperature recovery, ECE reduction on overconfident data."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration.recalibration import (
    RECALIBRATORS,
    HistogramBinning,
    IsotonicCalibration,
    PlattScaling,
    Recalibrator,
    TemperatureScaling,
    make_recalibrator,
)


def ece(c: np.ndarray, z: np.ndarray, n_bins: int = 10) -> float:
    """10 equal-width bins, bin i = [i/10, (i+1)/10), last bin closed (docs/design.md, 'Metrics')."""
    idx = np.minimum((c * n_bins).astype(int), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        mask = idx == b
        if mask.any():
            total += mask.mean() * abs(z[mask].mean() - c[mask].mean())
    return float(total)


def overconfident(n: int, temperature: float = 3.0, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """True correctness probability p; reported confidence sigmoid(T * logit(p)) (overconfident)."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.5, 0.95, n)
    z = (rng.random(n) < p).astype(float)
    logit = np.log(p / (1 - p))
    return 1 / (1 + np.exp(-temperature * logit)), z


@pytest.mark.parametrize("name", sorted(RECALIBRATORS))
def test_reduces_ece_out_of_sample(name: str) -> None:
    c_train, z_train = overconfident(4000, seed=1)
    c_test, z_test = overconfident(4000, seed=2)
    raw = ece(c_test, z_test)
    recal = make_recalibrator(name)
    assert isinstance(recal, Recalibrator) and recal.name == name
    out = recal.fit(c_train, z_train).transform(c_test)
    assert out.shape == c_test.shape and np.all((out >= 0) & (out <= 1))
    assert raw > 0.08
    assert ece(out, z_test) < raw / 2


def test_temperature_recovers_known_temperature() -> None:
    c, z = overconfident(40000, temperature=3.0, seed=4)
    t = TemperatureScaling().fit(c, z).temperature
    assert t == pytest.approx(3.0, rel=0.08)
    c2, z2 = overconfident(40000, temperature=0.5, seed=5)  # underconfident source
    assert TemperatureScaling().fit(c2, z2).temperature == pytest.approx(0.5, rel=0.08)


def test_platt_recovers_known_temperature() -> None:
    c, z = overconfident(40000, temperature=3.0, seed=4)
    platt = PlattScaling().fit(c, z)
    assert platt.a == pytest.approx(1 / 3, rel=0.1)
    assert abs(platt.b) < 0.1


def test_calibrated_source_is_left_nearly_alone() -> None:
    c, z = overconfident(20000, temperature=1.0, seed=6)
    assert TemperatureScaling().fit(c, z).temperature == pytest.approx(1.0, rel=0.08)
    out = PlattScaling().fit(c, z).transform(c)
    assert np.max(np.abs(out - c)) < 0.05


def test_isotonic_is_monotone_and_clips() -> None:
    c, z = overconfident(2000, seed=7)
    iso = IsotonicCalibration().fit(c[(c > 0.6) & (c < 0.99)], z[(c > 0.6) & (c < 0.99)])
    grid = np.linspace(0, 1, 101)
    out = iso.transform(grid)
    assert np.all(np.diff(out) >= 0)
    assert out[0] == out[np.searchsorted(grid, 0.6)]  # clipped below the training range
    assert iso.transform([]).shape == (0,)


def test_histogram_binning_values_and_empty_bins() -> None:
    c = np.array([0.12, 0.15, 0.18, 0.55, 0.58, 0.95, 1.0])
    z = np.array([0, 0, 1, 1, 0, 1, 1])
    h = HistogramBinning(n_bins=10).fit(c, z)
    assert h.transform([0.1, 0.5, 0.9, 1.0]) == pytest.approx([1 / 3, 0.5, 1.0, 1.0])
    # empty bins: between two filled bins the mean of the nearest neighbours, at the edges the
    # nearest filled bin
    assert h.transform([0.3]) == pytest.approx([(1 / 3 + 0.5) / 2])
    assert h.transform([0.05]) == pytest.approx([1 / 3])
    assert h.transform([0.75]) == pytest.approx([(0.5 + 1.0) / 2])
    assert h.counts.tolist() == [0, 3, 0, 0, 0, 2, 0, 0, 0, 2]
    with pytest.raises(ValueError):
        HistogramBinning(n_bins=0)


@pytest.mark.parametrize("name", sorted(RECALIBRATORS))
def test_single_class_does_not_crash(name: str) -> None:
    c = np.linspace(0.55, 0.95, 50)
    out = make_recalibrator(name).fit(c, np.ones(50)).transform(c)
    assert np.all(np.isfinite(out)) and np.all((out >= 0) & (out <= 1))


@pytest.mark.parametrize("name", sorted(RECALIBRATORS))
@pytest.mark.parametrize(
    ("confidence", "correct", "match"),
    [
        ([], [], "empty"),
        ([0.5, np.nan], [1, 0], "NaN"),
        ([0.5, 1.2], [1, 0], r"\[0, 1\]"),
        ([0.5, -0.1], [1, 0], r"\[0, 1\]"),
        ([0.5, 0.7], [1], "length mismatch"),
        ([0.5, 0.7], [1, 2], "0/1"),
        ([0.5, 0.7], [1, np.nan], "0/1"),
        ([[0.5, 0.7], [0.6, 0.8]], [1, 0, 1, 0], "one-dimensional"),
        (["x", "y"], [1, 0], "numbers"),
    ],
)
def test_input_validation(name: str, confidence, correct, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make_recalibrator(name).fit(confidence, correct)


@pytest.mark.parametrize("name", sorted(RECALIBRATORS))
def test_transform_before_fit_and_bad_transform_input(name: str) -> None:
    recal = make_recalibrator(name)
    with pytest.raises(RuntimeError, match="fitted"):
        recal.transform([0.5])
    recal.fit([0.6, 0.7, 0.8, 0.9], [0, 1, 1, 1])
    with pytest.raises(ValueError):
        recal.transform([1.5])
    assert recal.transform(0.75).shape == (1,)
    assert np.all(recal.fit_transform([0.6, 0.9], [True, False]) <= 1)


def test_unknown_recalibrator() -> None:
    with pytest.raises(ValueError, match="known: histogram, isotonic, platt, temperature"):
        make_recalibrator("beta")
