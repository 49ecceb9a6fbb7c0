"""Model-assisted (difference / PPI) population estimates (judgefuse.calibration.model_assisted):
checked against ppi-python on one stratum, against the labels-only estimator on strata, and by
a seeded coverage simulation."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration import CalibrationAccumulator
from judgefuse.calibration.model_assisted import (
    AssistedStratum,
    PredictionTotals,
    assisted_from_bins,
    brier_pseudo_values,
    difference_mean,
)
from judgefuse.calibration.stratified import StratumData
from judgefuse.calibration.stratified_data import parse_strata

ppi_py = pytest.importorskip("ppi_py")


def _stratum(name, y, f, labelled, guard=None):
    return AssistedStratum(name, int(y.size), float(f.sum()), y[labelled], f[labelled],
                           np.ones(int(labelled.sum())), guard)


def _population(rng, size):
    """Confidence c and whether the verdict is right, with c informative about it."""
    c = rng.uniform(0.5, 1.0, size)
    right = (rng.random(size) < c).astype(float)
    return c, right


@pytest.mark.parametrize("lam", [1.0, 0.4, 0.0])
def test_one_stratum_is_ppi_pythons_mean_when_the_population_is_large(lam):
    """Same inputs: labels y with predictions f on the labelled items, predictions on the rest.
    With a window of 200,000 verdicts the finite-population terms vanish (n/N = 5e-4) and the
    plain interval equals ppi_py.ppi_mean_ci."""
    rng = np.random.default_rng(3)
    c, right = _population(rng, 200_000)
    f = np.clip(c + 0.1, 0, 1)  # a biased prediction: the correction removes the bias
    labelled = np.zeros(c.size, dtype=bool)
    labelled[rng.choice(c.size, 100, replace=False)] = True
    ours = difference_mean([_stratum("all", right, f, labelled)], lam=lam, small_sample=False)
    lower, upper = ppi_py.ppi_mean_ci(right[labelled], f[labelled], f[~labelled], alpha=0.05, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(right[labelled], f[labelled], f[~labelled], lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-4)
    assert ours.lower == pytest.approx(float(np.ravel(lower)[0]), abs=1e-4)
    assert ours.upper == pytest.approx(float(np.ravel(upper)[0]), abs=1e-4)
    assert ours.labels == 100


def test_a_fully_labelled_stratum_adds_no_uncertainty_and_no_labels_widens_by_its_share():
    rng = np.random.default_rng(4)
    c, right = _population(rng, 300)
    all_labelled = _stratum("review", right, c, np.ones(300, dtype=bool))
    alone = difference_mean([all_labelled])
    assert alone.estimate == pytest.approx(right.mean())
    assert alone.lower == alone.upper == pytest.approx(right.mean())
    unlabelled = AssistedStratum("auto@0.1", 100, 90.0, np.array([]), np.array([]), np.array([]))
    both = difference_mean([all_labelled, unlabelled])
    assert np.isnan(both.estimate)
    share = 100 / 400
    assert both.upper - both.lower == pytest.approx(share)
    assert "auto@0.1" in both.method


def test_a_stratified_window_is_covered_and_an_informative_prediction_narrows_the_interval():
    """Seeded simulation: a review stratum (c < 0.8, 30% labelled) and an audited auto stratum
    (10%), y = a continuous quality the prediction explains well. 300 windows: the 95% interval
    covers the window's mean in >= 0.92 of them, whatever the prediction's bias, and is much
    narrower than the labels-only one (lam = 0) on the same labels."""
    rng = np.random.default_rng(5)
    covered, widths, widths_labels_only = 0, [], []
    runs = 300
    for _ in range(runs):
        c = rng.uniform(0.5, 1.0, 800)
        y = np.clip(c + rng.normal(0, 0.02, c.size), 0, 1)
        f = c - 0.15  # biased: the correction takes it out
        auto = c >= 0.8
        labelled = np.where(auto, rng.random(c.size) < 0.1, rng.random(c.size) < 0.3)
        strata = [_stratum("review", y[~auto], f[~auto], labelled[~auto]),
                  _stratum("auto@0.1", y[auto], f[auto], labelled[auto])]
        interval = difference_mean(strata, pseudo=0)  # y continuous, away from its ends
        labels_only = difference_mean(strata, lam=0.0, pseudo=0)
        covered += interval.lower <= y.mean() <= interval.upper
        widths.append(interval.upper - interval.lower)
        widths_labels_only.append(labels_only.upper - labels_only.lower)
    assert covered / runs >= 0.92
    assert np.mean(widths) < 0.5 * np.mean(widths_labels_only)


def test_accumulator_bins_give_the_per_verdict_estimates():
    """The service passes fine bins (each at its mean confidence) and prediction totals; the
    estimates equal the per-verdict ones up to the binning of the confidences."""
    acc = CalibrationAccumulator()
    rng = np.random.default_rng(6)
    c, right = _population(rng, 2000)
    auto = c >= 0.85
    labelled = np.where(auto, rng.random(c.size) < 0.2, rng.random(c.size) < 0.5)
    names = {"review": ~auto, "auto@0.2": auto}
    parsed = parse_strata([StratumData(name, int(m.sum()), acc.increments_many(c[m & labelled], right[m & labelled]))
                           for name, m in names.items()], acc, acc.th_eps[0])
    totals = {name: PredictionTotals(int(m.sum()), float(c[m].sum()), float((c[m] ** 2).sum()))
              for name, m in names.items()}
    binned = assisted_from_bins(parsed, totals)
    direct_acc = difference_mean([_stratum(n, right[m], c[m], labelled[m]) for n, m in names.items()])
    brier_y, brier_f = (c - right) ** 2, c * (1 - c)
    direct_brier = difference_mean([_stratum(n, brier_y[m], brier_f[m], labelled[m],
                                             brier_pseudo_values(c[m & labelled].mean())) for n, m in names.items()])
    for got, want in ((difference_mean(binned["accuracy"]), direct_acc),
                      (difference_mean(binned["brier"]), direct_brier)):
        assert got.labels == want.labels == int(labelled.sum())
        assert (got.estimate, got.lower, got.upper) == pytest.approx((want.estimate, want.lower, want.upper), abs=2e-3)


def test_inconsistent_strata_are_refused():
    with pytest.raises(ValueError, match="labelled verdicts but population"):
        difference_mean([AssistedStratum("s", 1, 1.0, np.ones(2), np.ones(2), np.ones(2))])
    with pytest.raises(ValueError, match="outside"):
        difference_mean([AssistedStratum("s", 5, 1.0, np.array([2.0]), np.ones(1), np.ones(1))])
    with pytest.raises(ValueError, match="level"):
        difference_mean([], level=1.0)
    assert np.isnan(difference_mean([]).estimate)
