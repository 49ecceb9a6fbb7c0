"""helped/harmed counts and the accuracy-controlled comparison ("When Calibration Rankings Reverse", section 4)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration import (
    HelpedHarmed,
    brier,
    compare_judges,
    ece,
    helped_harmed,
)
from judgefuse.calibration.comparison import compare_judges_with_intervals


def test_helped_harmed_counts() -> None:
    method = [1, 1, 0, 0, 1, True]
    ref = [0, 1, 1, 0, 0, 1]
    r = helped_harmed(method, ref)
    assert r == HelpedHarmed(helped=2, harmed=1, both_right=2, both_wrong=1)
    assert (r.n, r.net) == (6, 1)
    assert r.as_dict()["net"] == 1


# Judge 1: right on items 0-8, wrong on 9, always 0.95 confident (accuracy 0.9).
# Judge 2: right on items 0-5, wrong on 6-9, always 0.75 confident (accuracy 0.6).
C1, Z1 = [0.95] * 10, [1] * 9 + [0]
C2, Z2 = [0.75] * 10, [1] * 6 + [0] * 4


def test_known_reversal() -> None:
    r = compare_judges(C1, Z1, C2, Z2)
    assert (r.accuracy_1, r.accuracy_2, r.more_accurate) == (0.9, 0.6, 1)
    # raw: judge 1 wins both metrics
    assert r.raw.ece_1 == pytest.approx(0.05) and r.raw.ece_2 == pytest.approx(0.15)
    assert r.raw.brier_1 == pytest.approx(0.9 * 0.05**2 + 0.1 * 0.95**2)
    assert r.raw.brier_2 == pytest.approx(0.6 * 0.25**2 + 0.4 * 0.75**2)
    # IA: items 0-5 both right, item 9 both wrong -> accuracy 6/7 for both
    assert (r.n_both_right, r.n_both_wrong, r.instance_aligned.n) == (6, 1, 7)
    assert r.instance_aligned.ece_1 == pytest.approx(abs(6 / 7 - 0.95))
    assert r.instance_aligned.ece_2 == pytest.approx(abs(6 / 7 - 0.75))
    # DA: judge 1 weighted 0.6/0.9 on right, 0.4/0.1 on wrong -> weighted accuracy 0.6
    assert r.distribution_aligned.ece_1 == pytest.approx(abs(0.6 - 0.95))
    assert r.distribution_aligned.brier_1 == pytest.approx((6 * 0.05**2 + 4 * 0.95**2) / 10)
    assert r.distribution_aligned.ece_2 == r.raw.ece_2
    # judge 1's raw advantage was its accuracy: under DA it loses on both metrics
    assert r.reversals == {
        "ece/instance_aligned": False,
        "ece/distribution_aligned": True,
        "brier/instance_aligned": False,
        "brier/distribution_aligned": True,
    }
    assert r.ranking_reversal


def test_order_of_judges_is_symmetric() -> None:
    a = compare_judges(C1, Z1, C2, Z2)
    b = compare_judges(C2, Z2, C1, Z1)
    assert b.more_accurate == 2
    assert b.distribution_aligned.ece_2 == pytest.approx(a.distribution_aligned.ece_1)
    assert b.ranking_reversal and b.reversals == a.reversals


def test_da_weights_match_weighted_metrics() -> None:
    rng = np.random.default_rng(0)
    c1, c2 = rng.uniform(0.5, 1, 200), rng.uniform(0.5, 1, 200)
    z1, z2 = (rng.uniform(size=200) < 0.8).astype(int), (rng.uniform(size=200) < 0.55).astype(int)
    r = compare_judges(c1, z1, c2, z2)
    a1, a2 = z1.mean(), z2.mean()
    w = np.where(z1 == 1, a2 / a1, (1 - a2) / (1 - a1))
    assert np.sum(w * z1) / np.sum(w) == pytest.approx(a2)
    assert r.distribution_aligned.ece_1 == pytest.approx(ece(c1, z1, sample_weight=w))
    assert r.distribution_aligned.brier_1 == pytest.approx(brier(c1, z1, sample_weight=w))
    same = z1 == z2
    assert r.instance_aligned.ece_2 == pytest.approx(ece(c2[same], z2[same]))


def test_no_reversal_when_better_everywhere() -> None:
    # judge 1 calibrated (conf = accuracy within groups), judge 2 overconfident, same outcomes
    z = [1, 1, 1, 0, 0]
    r = compare_judges([0.6] * 5, z, [0.99] * 5, z)
    assert r.more_accurate is None and r.distribution_aligned == r.raw
    assert not r.ranking_reversal


def test_degenerate_views_are_nan_not_errors() -> None:
    # never the same outcome -> IA empty; judge 1 perfect -> DA impossible
    r = compare_judges([0.9, 0.9], [1, 1], [0.8, 0.8], [0, 0])
    assert r.instance_aligned.n == 0 and math.isnan(r.instance_aligned.ece_1)
    assert math.isnan(r.distribution_aligned.ece_1)
    assert not r.ranking_reversal


def test_length_mismatch() -> None:
    with pytest.raises(ValueError, match="same items"):
        compare_judges([0.5], [1], [0.5, 0.5], [1, 0])


# ------------------------------------------------------------------ differences with intervals


def _constant_judges(n: int, seed: int = 0):
    """Judge 1: 90% right, always 0.95 sure; judge 2: 60% right, always 0.8 sure."""
    rng = np.random.default_rng(seed)
    z1 = (rng.uniform(size=n) < 0.9).astype(int)
    z2 = (rng.uniform(size=n) < 0.6).astype(int)
    return np.full(n, 0.95), z1, np.full(n, 0.8), z2


def test_real_reversal_is_named_with_metric_and_view() -> None:
    c1, z1, c2, z2 = _constant_judges(2000)
    evidence = compare_judges_with_intervals(c1, z1, c2, z2, n_resamples=200)
    raw = evidence.differences[("ece", "raw")]
    assert raw.difference < 0 and raw.excludes_zero  # judge 1 better on raw ECE, clearly
    da = evidence.differences[("ece", "distribution_aligned")]
    assert da.flips and da.difference > 0  # reweighted to 60% accuracy, 0.95 confidence is far off
    assert ("ece", "distribution_aligned") in evidence.reversals()
    for diff in evidence.differences.values():
        assert diff.interval.low <= diff.difference <= diff.interval.high


def test_a_flip_inside_noise_is_not_a_reversal() -> None:
    """Two draws of the same judge: the raw order is noise, so no aligned flip may be called a reversal."""
    rng = np.random.default_rng(3)
    c = rng.uniform(0.5, 1.0, 300)
    z1 = (rng.uniform(size=300) < c).astype(int)
    z2 = (rng.uniform(size=300) < c).astype(int)
    evidence = compare_judges_with_intervals(c, z1, c, z2, n_resamples=200)
    for metric in ("ece", "brier"):
        raw = evidence.differences[(metric, "raw")]
        if not raw.excludes_zero:
            assert all(m != metric for m, _view in evidence.reversals())


def test_reversal_calls_are_rare_when_judges_are_equal() -> None:
    """False reversal rate by simulation: equally good judges, 60 runs; a reversal needs real evidence."""
    rng = np.random.default_rng(8)
    false_calls, naive_calls, runs = 0, 0, 60
    for run in range(runs):
        c = rng.uniform(0.5, 1.0, 200)
        z1 = (rng.uniform(size=200) < c).astype(int)
        z2 = (rng.uniform(size=200) < c).astype(int)
        evidence = compare_judges_with_intervals(c, z1, c, z2, n_resamples=100, seed=run)
        false_calls += bool(evidence.reversals())
        naive_calls += evidence.comparison.ranking_reversal
    print(f"reversal called on equal judges: {false_calls / runs:.3f} with intervals, "
          f"{naive_calls / runs:.3f} by order alone (target: rare)")
    assert false_calls <= naive_calls and false_calls / runs <= 0.1


def test_intervals_equal_recomputing_every_view_on_each_resample() -> None:
    """The resamples gather each item's bin instead of binning again (issue 46): every interval
    is the one rebuilding ``compare_judges`` on each resample gives, to the bit."""
    from judgefuse.calibration import compare_judges
    from judgefuse.calibration.bootstrap import interval_from_stats
    from judgefuse.calibration.comparison import COMPARED_METRICS, VIEWS

    rng = np.random.default_rng(7)
    n = 500
    # confidences on the bin edges too (0.1, 0.5, 1.0), where a recomputed bin could differ
    c1 = np.where(rng.random(n) < 0.2, rng.choice([0.5, 0.6, 0.1, 1.0], n), rng.uniform(0.5, 1.0, n))
    c2 = rng.uniform(0.5, 1.0, n)
    z1, z2 = rng.random(n) < 0.75, rng.random(n) < 0.65
    evidence = compare_judges_with_intervals(c1, z1, c2, z2, n_bins=10, n_resamples=60, seed=3)
    draw = np.random.default_rng(3)
    stats: dict[tuple[str, str], list[float]] = {(m, v): [] for m in COMPARED_METRICS for v in VIEWS}
    for _ in range(60):
        idx = draw.integers(0, n, size=n)
        resampled = compare_judges(c1[idx], z1[idx], c2[idx], z2[idx], n_bins=10)
        for metric, view in stats:
            scores = getattr(resampled, view)
            stats[(metric, view)].append(getattr(scores, f"{metric}_1") - getattr(scores, f"{metric}_2"))
    for (metric, view), values in stats.items():
        got = evidence.differences[(metric, view)]
        want = interval_from_stats(
            got.score_1 - got.score_2, np.asarray(values), level=0.95, bounds=(-1.0, 1.0), n_resamples=60
        )
        assert got.interval == want, (metric, view)
