"""Point scores on small cases computed by hand, bin edges, and an independent ECE loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration import (
    accuracy,
    adaptive_ce,
    brier,
    ece,
    ice,
    macroce,
    mce,
    nll,
    reliability_diagram,
)

# c on edges (0.1 -> bin 1, 1.0 -> bin 9, 0.0 -> bin 0), two empty-bin gaps in between
C5 = [0.1, 0.15, 0.95, 1.0, 0.0]
Z5 = [0, 1, 1, 1, 0]


def ece_loop(conf, corr, n_bins=10, weights=None):
    """Independent reference: plain Python, bins by exact fraction comparison."""
    from fractions import Fraction

    weights = weights or [1.0] * len(conf)
    total = sum(weights)
    exact = [Fraction(c).limit_denominator(10**9) for c in conf]  # the decimal the user meant
    out = 0.0
    for b in range(n_bins):
        lo, hi = Fraction(b, n_bins), Fraction(b + 1, n_bins)
        members = [
            i for i, f in enumerate(exact) if lo <= f < hi or (b == n_bins - 1 and f == 1)
        ]
        w = sum(weights[i] for i in members)
        if w == 0:
            continue
        acc = sum(weights[i] * corr[i] for i in members) / w
        conf_b = sum(weights[i] * conf[i] for i in members) / w
        out += w / total * abs(acc - conf_b)
    return out


def test_hand_case_all_scores() -> None:
    assert accuracy(Z5) == 0.6
    # bin0: {0.0: wrong} gap 0; bin1: {0.1 w, 0.15 r} acc .5 conf .125; bin9: {.95 r, 1.0 r}
    assert ece(C5, Z5) == pytest.approx(0.4 * 0.375 + 0.4 * 0.025)
    assert mce(C5, Z5) == pytest.approx(0.375)
    assert brier(C5, Z5) == pytest.approx((0.01 + 0.85**2 + 0.05**2) / 5)
    assert ice(C5, Z5) == pytest.approx((0.1 + 0.85 + 0.05) / 5)
    assert macroce(C5, Z5) == pytest.approx(((0.85 + 0.05 + 0.0) / 3 + (0.1 + 0.0) / 2) / 2)
    clip = 1e-12
    expected_nll = (
        -math.log(1 - 0.1) - math.log(0.15) - math.log(0.95) - math.log(1 - clip)
        - math.log(1 - clip)
    ) / 5
    assert nll(C5, Z5) == pytest.approx(expected_nll)


def test_bin_edges() -> None:
    bins = reliability_diagram([0.0, 0.1, 0.3, 0.7, 0.9, 1.0], [1, 1, 1, 1, 1, 1])
    assert [b.count for b in bins] == [1, 1, 0, 1, 0, 0, 0, 1, 0, 2]
    # 0.29 is on the 29/100 edge (floor(0.29 * 100) would say 28), 0.3 on the 30/100 one
    bins = reliability_diagram([0.29, 0.3], [1, 1], n_bins=100)
    assert bins[29].count == 1 and bins[30].count == 1 and bins[28].count == 0


@pytest.mark.parametrize("n_bins", [1, 3, 7, 10, 15, 20, 100])
def test_ece_matches_independent_loop(n_bins: int) -> None:
    rng = np.random.default_rng(n_bins)
    c = np.round(rng.uniform(0, 1, 400), 2)  # many values exactly on decimal edges
    c[:5] = [0.0, 1.0, 0.1, 0.5, 0.9]
    z = (rng.uniform(size=400) < c).astype(int)
    assert ece(c, z, n_bins=n_bins) == pytest.approx(ece_loop(list(c), list(z), n_bins), abs=1e-12)
    w = rng.uniform(0.1, 3.0, 400)
    assert ece(c, z, n_bins=n_bins, sample_weight=w) == pytest.approx(
        ece_loop(list(c), list(z), n_bins, list(w)), abs=1e-12
    )


def test_perfect_and_worst() -> None:
    assert ece([1.0, 0.0], [1, 0]) == 0.0
    assert brier([1.0, 0.0], [1, 0]) == 0.0
    assert ece([1.0, 1.0], [0, 0]) == 1.0
    assert mce([1.0, 1.0], [0, 0]) == 1.0
    assert nll([1.0], [0]) == pytest.approx(-math.log(1e-12))
    assert nll([0.0], [1]) == pytest.approx(-math.log(1e-12))


def test_all_correct_all_wrong() -> None:
    c = [0.6, 0.8, 1.0]
    assert accuracy([1, 1, 1]) == 1.0 and accuracy([False] * 3) == 0.0
    # empty class: MacroCE is the other class's term alone
    assert macroce(c, [1, 1, 1]) == pytest.approx((0.4 + 0.2 + 0.0) / 3)
    assert macroce(c, [0, 0, 0]) == pytest.approx((0.6 + 0.8 + 1.0) / 3)
    assert ice(c, [1, 1, 1]) == pytest.approx(0.2)


def test_macroce_ignores_class_balance() -> None:
    # same per-class errors, very different accuracies -> same MacroCE, different ICE
    a = macroce([0.9] * 9 + [0.3], [1] * 9 + [0])
    b = macroce([0.9] + [0.3] * 9, [1] + [0] * 9)
    assert a == pytest.approx(b) == pytest.approx((0.1 + 0.3) / 2)
    assert ice([0.9] * 9 + [0.3], [1] * 9 + [0]) != pytest.approx(ice([0.9] + [0.3] * 9, [1] + [0] * 9))


def test_mce_ignores_empty_bins() -> None:
    # only bin 5 is used: gap |1 - 0.55|
    assert mce([0.55, 0.55], [1, 1]) == pytest.approx(0.45)


def test_adaptive_ce_hand_case() -> None:
    # sorted: .5(0) .6(1) .7(0) | .8(1) .9(1) -> chunks of 3 and 2 (np.array_split)
    got = adaptive_ce([0.9, 0.8, 0.7, 0.6, 0.5], [1, 1, 0, 1, 0], n_bins=2)
    assert got == pytest.approx(0.6 * abs(1 / 3 - 0.6) + 0.4 * abs(1.0 - 0.85))


def test_adaptive_ce_ties_shared_at_mean() -> None:
    # one tie run cut in half: each half gets the run's mean correctness, whatever the order
    for z in ([1, 1, 0, 0], [0, 0, 1, 1], [1, 0, 1, 0]):
        assert adaptive_ce([0.7] * 4, z, n_bins=2) == pytest.approx(0.2)


def test_adaptive_ce_more_bins_than_items() -> None:
    assert adaptive_ce([0.2, 0.7], [1, 0], n_bins=10) == pytest.approx((0.8 + 0.7) / 2)


def test_adaptive_ce_equals_ece_when_bins_coincide() -> None:
    # 10 items, one per equal-width bin -> equal-mass chunks are the same bins
    c = np.arange(10) / 10 + 0.05
    z = np.array([0, 0, 1, 0, 1, 1, 0, 1, 1, 1])
    assert adaptive_ce(c, z) == pytest.approx(ece(c, z))


def test_weighted_scores() -> None:
    c, z = [0.9, 0.2], [1, 1]
    assert brier(c, z, sample_weight=[3, 1]) == pytest.approx((3 * 0.01 + 0.64) / 4)
    # integer weights equal repetition
    assert ece(c, z, sample_weight=[3, 1]) == pytest.approx(ece([0.9] * 3 + [0.2], [1] * 4))
    with pytest.raises(ValueError, match="sample_weight"):
        ece(c, z, sample_weight=[1, -1])
    with pytest.raises(ValueError, match="sample_weight"):
        brier(c, z, sample_weight=[1])
    with pytest.raises(ValueError, match="sample_weight"):
        brier(c, z, sample_weight=[0, 0])


def test_bool_and_float_correct_accepted() -> None:
    assert ece(C5, np.array(Z5, dtype=bool)) == ece(C5, np.array(Z5, dtype=float))
