"""The window (finite-population) precision bound and the tuner's ``support`` and ``window`` options.

Hand-computed cases against ``scipy.stats.hypergeom`` and ``scipy.stats.beta``; one bounded
simulation of the window guarantee (the full one is ``benchmarks/bench_precision_bound.py``).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import beta, hypergeom

from judgefuse.calibration.stratified_tuning import tune_threshold_stratified
from judgefuse.calibration.window_bound import (
    hypergeom_upper,
    window_error_shares,
    window_precision_lower_bound,
)


def _brute_upper(errors: int, drawn: int, total: int, alpha: float) -> int:
    """Largest D whose chance of <= ``errors`` wrong in ``drawn`` of ``total`` exceeds alpha."""
    return max(d for d in range(errors, total - (drawn - errors) + 1)
               if hypergeom.cdf(errors, total, d, drawn) > alpha)


@pytest.mark.parametrize(("errors", "drawn", "total", "alpha"), [
    (0, 10, 30, 0.1), (0, 9, 87, 0.1), (2, 40, 200, 0.05), (5, 20, 21, 0.1), (3, 3, 50, 0.2),
    (0, 1, 1, 0.1), (7, 60, 60, 0.1),
])
def test_hypergeom_upper_is_the_exact_inversion(errors: int, drawn: int, total: int, alpha: float) -> None:
    got = float(hypergeom_upper(errors, drawn, total, alpha))
    assert got == _brute_upper(errors, drawn, total, alpha)
    # the next count up is rejected: the bound is the exact edge, not just a valid one
    if got < total - (drawn - errors):
        assert hypergeom.cdf(errors, total, int(got) + 1, drawn) <= alpha


def test_hypergeom_upper_hand_values_and_broadcasting() -> None:
    """10 of 30 all right: at 90% at most 5 of the 30 are wrong (P(0 of 10 | 5 wrong) = 0.109,
    P(0 of 10 | 6 wrong) = 0.0653: 20·19·18·17·16·15 / (30·29·28·27·26·25)); Clopper-Pearson's rate bound would allow 6.2. Sampling all
    of a stratum leaves nothing unknown; no sample leaves everything."""
    assert hypergeom.pmf(0, 30, 5, 10) == pytest.approx(0.1088, abs=1e-4)
    assert hypergeom.pmf(0, 30, 6, 10) == pytest.approx(0.0653, abs=1e-4)
    out = hypergeom_upper(np.array([0, 3, 0]), np.array([10, 30, 0]), np.array([30, 30, 30]), 0.1)
    assert out.tolist() == [5.0, 3.0, 30.0]
    assert 30 * (1 - 0.1 ** (1 / 10)) > 6.0
    with pytest.raises(ValueError, match="errors <= drawn <= total"):
        hypergeom_upper(3, 2, 10, 0.1)


def test_window_bound_hand_computed_two_strata() -> None:
    """Review is a census (40 accepted, 4 wrong: known exactly, spends no delta); audit: 12 of
    90 accepted labelled, 1 wrong, takes all of delta. Bound = 1 - (4 + D_up) / 130."""
    acc = np.array([[40.0, 12.0]])
    err = np.array([[4.0, 1.0]])
    labels, pop, m = np.array([100.0, 20.0]), np.array([100.0, 150.0]), np.array([[40.0, 90.0]])
    d_up = _brute_upper(1, 12, 90, 0.1)
    got = window_precision_lower_bound(acc, err, labels, pop, m, delta=0.1)[0]
    assert got == pytest.approx(1.0 - (4 + d_up) / 130.0)
    shares = window_error_shares(acc, m, np.array([[True, False]]))
    assert shares.tolist() == [[0.0, 1.0]]


def test_window_bound_splits_delta_and_handles_unlabelled_acceptance() -> None:
    """Two sampled strata share delta by M sqrt((1 - A/M)/A); a stratum that accepts verdicts
    but none of its labels counts them all as wrong; nothing accepted is vacuous."""
    acc = np.array([[10.0, 20.0, 0.0]])
    err = np.array([[1.0, 2.0, 0.0]])
    labels, pop = np.array([30.0, 40.0, 5.0]), np.array([100.0, 80.0, 50.0])
    m = np.array([[40.0, 50.0, 3.0]])
    w = np.array([40 * np.sqrt(0.75 / 10), 50 * np.sqrt(0.6 / 20)])
    w = w / w.sum()
    expected = 1.0 - (_brute_upper(1, 10, 40, 0.1 * w[0]) + _brute_upper(2, 20, 50, 0.1 * w[1]) + 3) / 93
    got = window_precision_lower_bound(acc, err, labels, pop, m, delta=0.1)[0]
    assert got == pytest.approx(expected)
    zero = window_precision_lower_bound(np.zeros((1, 3)), np.zeros((1, 3)), labels, pop,
                                        np.zeros((1, 3)), delta=0.1)
    assert zero.tolist() == [1.0]


def test_window_future_adds_the_binomial_step() -> None:
    """window_future: the window's error count at delta/2, then Clopper-Pearson on all accepted."""
    acc, err = np.array([[12.0]]), np.array([[1.0]])
    labels, pop, m = np.array([20.0]), np.array([150.0]), np.array([[90.0]])
    d_up = _brute_upper(1, 12, 90, 0.05)
    got = window_precision_lower_bound(acc, err, labels, pop, m, delta=0.1, future_share=0.5)[0]
    assert got == pytest.approx(1.0 - beta.ppf(0.95, d_up + 1, 90 - d_up))


def _stream(seed: int, n: int = 1500, tau0: float = 0.8, rate: float = 0.2):
    rng = np.random.default_rng(seed)
    c = rng.uniform(0.5, 1.0, n)
    z = rng.uniform(size=n) < np.minimum(1.0, c + 0.05)
    auto = c >= tau0
    lab = ~auto | (rng.uniform(size=n) < rate)
    strata = np.where(auto, "auto", "review")
    pop = {"review": int((~auto).sum()), "auto": int(auto.sum())}
    return c, z, lab, strata, pop


def test_support_drops_a_stratum_the_candidate_cannot_reach() -> None:
    """Review holds exactly the verdicts below tau0: above tau0 the bound is the one-stratum
    Clopper-Pearson bound of the audit labels at all of the start's delta (hand-computed from
    the path), and higher than the bound that must allow review verdicts to be accepted."""
    c, z, lab, strata, pop = _stream(3)
    kwargs = dict(target_precision=0.85, delta=0.1, chains=1)
    with_support = tune_threshold_stratified(c[lab], z[lab], strata[lab], pop,
                                             support={"review": 0.8}, **kwargs)
    without = tune_threshold_stratified(c[lab], z[lab], strata[lab], pop, **kwargs)
    top = with_support.path[0]
    assert top.tau >= 0.8
    wrong = int((~z[lab] & (c[lab] >= top.tau)).sum())
    assert top.lower_bound == pytest.approx(1.0 - beta.ppf(0.9, wrong + 1, top.n_accepted - wrong))
    assert without.path[0].tau == top.tau and without.path[0].lower_bound < top.lower_bound - 0.01
    with pytest.raises(ValueError, match="not in population"):
        tune_threshold_stratified(c[lab], z[lab], strata[lab], pop, support={"reviw": 0.8}, **kwargs)


def test_window_option_needs_every_confidence() -> None:
    c, z, lab, strata, pop = _stream(4)
    window = {s: c[strata == s] for s in pop}
    report = tune_threshold_stratified(c[lab], z[lab], strata[lab], pop, target_precision=0.85,
                                       delta=0.1, bound="window", window=window)
    assert report.threshold is not None
    with pytest.raises(ValueError, match="needs window="):
        tune_threshold_stratified(c[lab], z[lab], strata[lab], pop, target_precision=0.85,
                                  delta=0.1, bound="window")
    with pytest.raises(ValueError, match="must list every verdict"):
        tune_threshold_stratified(c[lab], z[lab], strata[lab], pop, target_precision=0.85,
                                  delta=0.1, bound="window", window={**window, "auto": window["auto"][1:]})


def test_window_bound_holds_at_its_level_on_a_fixed_window() -> None:
    """Bounded simulation (< 1 s): one fixed window (review census: 40 accepted, 4 wrong; audit:
    150 verdicts, 90 accepted, 14 of them wrong; window precision 1 - 18/130 = 0.862), 4,000
    draws of 30 audit labels. A target just above the true precision is certified in <= delta
    of draws (discreteness makes it ~0.04); 0.02 below it, often (the bound is not vacuous)."""
    rng = np.random.default_rng(0)
    draws, big_n, m, d = 4000, 150, 90, 14
    accepted = np.arange(big_n) < m
    wrong = np.arange(big_n) < d
    acc, err = np.zeros((draws, 2)), np.zeros((draws, 2))
    acc[:, 0], err[:, 0] = 40, 4
    for r in range(draws):
        pick = rng.choice(big_n, 30, replace=False)
        acc[r, 1], err[r, 1] = accepted[pick].sum(), wrong[pick].sum()
    bound = window_precision_lower_bound(acc, err, np.array([100.0, 30.0]), np.array([100.0, 150.0]),
                                         np.tile([40.0, 90.0], (draws, 1)), delta=0.1)
    precision = 1.0 - (4 + d) / 130
    above = float((bound >= precision + 1e-9).mean())
    print(f"certified above the window's precision: {above:.3f} (delta 0.1)")
    assert above <= 0.1 + 2.5 * np.sqrt(0.1 * 0.9 / draws)
    assert float((bound >= precision - 0.02).mean()) > 0.05
