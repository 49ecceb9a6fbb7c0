"""helped/harmed counts and the accuracy-controlled comparison (seed 000 section 4)."""

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
