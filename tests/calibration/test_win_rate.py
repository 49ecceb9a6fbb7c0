"""Win rates with prediction-powered intervals (judgefuse.calibration.win_rate), checked
against ppi-python on the same inputs."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration.win_rate import clt_mean, ppi_mean, win_rates

ppi_py = pytest.importorskip("ppi_py")


def _comparisons(rng: np.random.Generator, n_total: int, n_labels: int):
    truth = rng.choice([1.0, 0.5, 0.0], size=n_total, p=[0.45, 0.1, 0.45])
    says_x = np.where(truth == 1.0, 0.85, np.where(truth == 0.5, 0.7, 0.35))  # biased toward X
    judged = (rng.random(n_total) < says_x).astype(float)
    labelled = rng.choice(n_total, size=n_labels, replace=False)
    return truth, judged, labelled


@pytest.mark.parametrize("lam", [None, 1.0, 0.0, 0.4])
def test_ppi_mean_is_ppi_pythons(lam):
    rng = np.random.default_rng(5)
    truth, judged, labelled = _comparisons(rng, 800, 90)
    rest = np.setdiff1d(np.arange(800), labelled)
    ours = ppi_mean(truth[labelled], judged[labelled], judged[rest], alpha=0.05, lam=lam)
    lower, upper = ppi_py.ppi_mean_ci(truth[labelled], judged[labelled], judged[rest], alpha=0.05, lam=lam)
    point = ppi_py.ppi_mean_pointestimate(truth[labelled], judged[labelled], judged[rest], lam=lam)
    assert ours.estimate == pytest.approx(float(np.ravel(point)[0]), abs=1e-12)
    assert (ours.lower, ours.upper) == pytest.approx((float(np.ravel(lower)[0]), float(np.ravel(upper)[0])), abs=1e-12)


def test_labels_only_is_ppi_with_lam_zero_and_judge_only_ignores_labels():
    rng = np.random.default_rng(6)
    truth, judged, labelled = _comparisons(rng, 500, 60)
    rates = win_rates(judged, labelled, truth[labelled])
    lower, upper = ppi_py.ppi_mean_ci(truth[labelled], judged[labelled],
                                      np.delete(judged, labelled), alpha=0.05, lam=0.0)
    assert (rates.labels_only.lower, rates.labels_only.upper) == pytest.approx(
        (float(np.ravel(lower)[0]), float(np.ravel(upper)[0])), abs=1e-12)
    assert rates.judge_only.estimate == pytest.approx(judged.mean())
    assert rates.n_verdicts == 500 and rates.n_labels == 60


def test_the_corrected_interval_covers_where_the_judge_only_one_does_not():
    """A judge biased toward X: over 200 simulated comparisons the judge-only interval almost
    never covers the true win rate 0.5; the corrected one does about 95% of the time."""
    rng = np.random.default_rng(7)
    covered = {"corrected": 0, "judge_only": 0, "labels_only": 0}
    widths = {"corrected": 0.0, "labels_only": 0.0}
    runs = 200
    for _ in range(runs):
        truth, judged, labelled = _comparisons(rng, 1000, 100)
        rates = win_rates(judged, labelled, truth[labelled])
        for name in covered:
            interval = getattr(rates, name)
            covered[name] += interval.lower <= 0.5 <= interval.upper
        for name in widths:
            interval = getattr(rates, name)
            widths[name] += (interval.upper - interval.lower) / runs
    assert covered["judge_only"] / runs < 0.05
    assert covered["corrected"] / runs >= 0.91 and covered["labels_only"] / runs >= 0.91
    assert widths["corrected"] < widths["labels_only"]


def test_bad_inputs_are_refused_and_empty_labels_give_nan():
    with pytest.raises(ValueError, match="distinct indices"):
        win_rates([1, 0], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        win_rates([2, 0], [0], [1])
    assert np.isnan(win_rates([1.0, 0.0], [], []).corrected.estimate)
    assert clt_mean([1.0, 0.0, 1.0]).estimate == pytest.approx(2 / 3)


def test_the_small_sample_correction_keeps_ppi_pythons_centre_and_widens_its_interval():
    """win_rates' corrected interval is ppi_py's estimate with a t quantile on n - 2 degrees of
    freedom (the slope lam is fitted on the same labels): same centre, wider, and the gap
    shrinks as the labels grow."""
    rng = np.random.default_rng(8)
    ratios = []
    for n_labels in (20, 60, 400):
        truth, judged, labelled = _comparisons(rng, 2000, n_labels)
        rest = np.setdiff1d(np.arange(2000), labelled)
        corrected = win_rates(judged, labelled, truth[labelled]).corrected
        lower, upper = ppi_py.ppi_mean_ci(truth[labelled], judged[labelled], judged[rest], alpha=0.05)
        lower, upper = float(np.ravel(lower)[0]), float(np.ravel(upper)[0])
        assert corrected.estimate == pytest.approx((lower + upper) / 2, abs=1e-12)
        assert corrected.lower < lower and corrected.upper > upper
        assert corrected.method == f"prediction-powered (t quantile, {n_labels - 2} df)"
        ratios.append((corrected.upper - corrected.lower) / (upper - lower))
    assert ratios[0] > ratios[1] > ratios[2] > 1.0
    assert ratios[2] < 1.01
