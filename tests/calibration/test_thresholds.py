"""tune_threshold: Clopper-Pearson bounds, fixed-sequence scan, reports, and the guarantee."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binom

from judgefuse.calibration.thresholds import (
    ScanStep,
    ThresholdReport,
    clopper_pearson_lower,
    tune_threshold,
)


# ---------------------------------------------------------------- Clopper-Pearson
def test_clopper_pearson_hand_computed() -> None:
    # k = n: Beta(n, 1) has CDF x^n, so the bound is delta ** (1 / n)
    assert clopper_pearson_lower(10, 10, 0.1) == pytest.approx(0.1 ** 0.1, abs=1e-12)
    assert clopper_pearson_lower(1, 1, 0.05) == pytest.approx(0.05, abs=1e-12)
    # k = 0: nothing correct, bound 0
    assert clopper_pearson_lower(0, 25, 0.1) == 0.0
    # k = n - 1: Beta(n-1, 2) CDF is n x^(n-1) - (n-1) x^n; n = 2 -> 2x - x^2 = 0.1
    assert clopper_pearson_lower(1, 2, 0.1) == pytest.approx(1 - math.sqrt(0.9), abs=1e-12)
    # n = 3, k = 2: 3x^2 - 2x^3 = 0.1 -> x = 0.19580...
    x = float(clopper_pearson_lower(2, 3, 0.1))
    assert 3 * x**2 - 2 * x**3 == pytest.approx(0.1, abs=1e-12)
    assert x == pytest.approx(0.1958, abs=1e-4)


@pytest.mark.parametrize(("k", "n"), [(1, 5), (27, 30), (90, 100), (355, 400)])
def test_clopper_pearson_is_the_exact_binomial_tail(k: int, n: int) -> None:
    """At the bound p, P(Bin(n, p) >= k) = delta: the defining property of the exact bound."""
    p = float(clopper_pearson_lower(k, n, 0.1))
    assert binom.sf(k - 1, n, p) == pytest.approx(0.1, abs=1e-9)


# ---------------------------------------------------------------- the scan
def _blocks(*blocks: tuple[float, int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(confidence, n items, n correct) blocks -> arrays."""
    c = np.concatenate([np.full(n, conf) for conf, n, _ in blocks])
    z = np.concatenate([np.r_[np.ones(k), np.zeros(n - k)] for _, n, k in blocks])
    return c, z


def test_single_block_hand_computed() -> None:
    c, z = _blocks((0.95, 40, 40), (0.6, 60, 30))
    rep = tune_threshold(c, z, target_precision=0.9, delta=0.1)
    # at 0.95: 40/40, bound 0.1 ** (1/40) = 0.9441 >= 0.9; at 0.6: 70/100 fails
    assert rep.threshold == 0.95
    assert rep.n_accepted == 40 and rep.precision == 1.0
    assert rep.lower_bound == pytest.approx(0.1 ** (1 / 40), abs=1e-12)
    assert rep.coverage == 0.4 and rep.review_load == pytest.approx(0.6)
    assert rep.expected_errors == 0.0
    assert [s.tau for s in rep.path] == [0.95, 0.6]
    assert rep.path[1].n_accepted == 100 and rep.path[1].precision == 0.7
    assert "stopped at tau=0.6" in rep.reason
    # the certificate's margin: its lower bound over the target, by hand
    assert rep.margin == pytest.approx(0.1 ** (1 / 40) - 0.9, abs=1e-12)
    assert rep.as_dict()["margin"] == pytest.approx(rep.margin)


def test_a_stop_point_reads_apart_from_the_threshold_at_six_digits() -> None:
    """The reason names the failing candidate with as many digits as the threshold is printed
    with: at 4 digits a stop at 0.910358 under a threshold of 0.910432 read "tau=0.9104"."""
    c, z = _blocks((0.910432, 60, 60), (0.910358, 200, 100))
    rep = tune_threshold(c, z, target_precision=0.9, delta=0.1)
    assert rep.threshold == 0.910432
    assert "stopped at tau=0.910358" in rep.reason


def test_no_threshold_has_no_margin() -> None:
    c, z = _blocks((0.9, 50, 25))
    rep = tune_threshold(c, z, target_precision=0.9, delta=0.1)
    assert rep.threshold is None and math.isnan(rep.margin) and rep.as_dict()["margin"] is None


def test_scan_stops_at_first_failure_even_if_a_lower_threshold_passes_again() -> None:
    c, z = _blocks((0.99, 50, 50), (0.9, 50, 25), (0.8, 400, 400))
    # at 0.9: 75/100 fails; at 0.8: 475/500 = 0.95 would pass on its own
    alone = tune_threshold(c, z, target_precision=0.85, candidates=[0.8])
    assert alone.threshold == 0.8
    rep = tune_threshold(c, z, target_precision=0.85)
    assert rep.threshold == 0.99
    assert [s.tau for s in rep.path] == [0.99, 0.9]  # 0.8 never tested
    assert rep.path[-1].lower_bound < 0.85 <= rep.path[0].lower_bound


def test_small_sets_are_skipped_not_stopping() -> None:
    # a tiny, entirely wrong top block: fewer than min_count items -> skipped
    c, z = _blocks((0.999, 5, 0), (0.95, 200, 198))
    rep = tune_threshold(c, z, target_precision=0.9, min_count=30)
    assert rep.n_skipped == 1
    assert rep.threshold == 0.95 and rep.n_accepted == 205  # the top errors are folded in
    assert rep.precision == pytest.approx(198 / 205)
    assert [s.tau for s in rep.path] == [0.95]
    # with min_count 5 the top block is still skipped: 5 items cannot certify 0.9 even with no
    # error (0.1 ** (1 / 5) = 0.63), a label-free reason, so the scan starts below it
    small = tune_threshold(c, z, target_precision=0.9, min_count=5)
    assert small.n_skipped == 1 and small.threshold == 0.95
    # a wrong top block large enough to pass if it were right is tested and stops the scan
    c2, z2 = _blocks((0.999, 30, 0), (0.95, 200, 198))
    strict = tune_threshold(c2, z2, target_precision=0.9, min_count=5)
    assert strict.threshold is None and strict.path[0].tau == 0.999


def test_no_threshold_gives_none_with_reason() -> None:
    c, z = _blocks((0.9, 100, 60), (0.7, 100, 50))
    rep = tune_threshold(c, z, target_precision=0.9)
    assert rep.threshold is None and not rep.qualified
    assert rep.n_accepted == 0 and rep.coverage == 0.0 and rep.review_load == 1.0
    assert math.isnan(rep.precision) and math.isnan(rep.lower_bound)
    assert rep.reason.startswith("no threshold qualifies: route everything to review")
    assert "tau=0.9" in rep.reason
    assert len(rep.path) == 1

    few = tune_threshold([0.99] * 10, [1] * 10, target_precision=0.5, min_count=30)
    assert few.threshold is None and few.path == [] and "min_count=30" in few.reason
    assert json.loads(json.dumps(few.as_dict()))["precision"] is None


def test_every_threshold_passing_chooses_the_lowest() -> None:
    rng = np.random.default_rng(1)
    c = rng.uniform(0.5, 1.0, 400)
    rep = tune_threshold(c, np.ones(400), target_precision=0.9)
    assert rep.threshold == c.min() and rep.coverage == 1.0
    assert rep.reason.startswith("every tested threshold passed")


def test_candidates_thinned_and_explicit() -> None:
    rng = np.random.default_rng(2)
    c = rng.uniform(0.5, 1.0, 5000)
    z = rng.uniform(size=5000) < c
    rep = tune_threshold(c, z, target_precision=0.8)
    assert rep.n_candidates == 200
    assert all(tau in set(c.tolist()) for tau in (s.tau for s in rep.path))
    full = tune_threshold(c, z, target_precision=0.8, max_candidates=None)
    assert full.n_candidates == 5000
    # the full scan has finer resolution: its threshold is never higher by more than a step
    assert full.threshold <= rep.threshold + 0.01
    explicit = tune_threshold(c, z, target_precision=0.8, candidates=[0.7, 0.95, 0.9, 0.8])
    assert [s.tau for s in explicit.path][: 2] == [0.95, 0.9]


def test_report_is_internally_consistent() -> None:
    rng = np.random.default_rng(3)
    c = rng.beta(6, 1.5, 3000)
    z = rng.uniform(size=3000) < c
    rep = tune_threshold(c, z, target_precision=0.9, delta=0.05)
    _check_consistent(rep, c, z)


def _check_consistent(rep: ThresholdReport, c: np.ndarray, z: np.ndarray) -> None:
    assert rep.threshold is not None
    accepted = c >= rep.threshold
    assert rep.n == c.size
    assert rep.n_accepted == int(accepted.sum())
    assert rep.coverage == pytest.approx(accepted.mean())
    assert rep.review_load == pytest.approx(1 - rep.coverage)
    assert rep.precision == pytest.approx(np.mean(z[accepted]))
    assert rep.expected_errors == pytest.approx(rep.n_accepted * (1 - rep.precision))
    assert rep.expected_errors == int((~z[accepted].astype(bool)).sum())
    assert rep.lower_bound == pytest.approx(
        float(clopper_pearson_lower(int(z[accepted].sum()), rep.n_accepted, rep.delta))
    )
    assert rep.lower_bound >= rep.target and rep.precision >= rep.lower_bound
    assert rep.n_accepted >= rep.min_count
    # the path is high to low, all but possibly the last pass, and the chosen one is in it
    taus = [s.tau for s in rep.path]
    assert taus == sorted(taus, reverse=True)
    assert all(isinstance(s, ScanStep) and s.lower_bound >= rep.target for s in rep.path[:-1])
    assert rep.threshold in taus
    i = taus.index(rep.threshold)
    assert i in (len(taus) - 1, len(taus) - 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"target_precision": 1.0}, "target_precision"),
        ({"target_precision": 0.0}, "target_precision"),
        ({"target_precision": float("nan")}, "target_precision"),
        ({"target_precision": "x"}, "target_precision"),
        ({"target_precision": 0.9, "delta": 0.0}, "delta"),
        ({"target_precision": 0.9, "delta": 1.5}, "delta"),
        ({"target_precision": 0.9, "min_count": 0}, "min_count"),
        ({"target_precision": 0.9, "min_count": 2.5}, "min_count"),
        ({"target_precision": 0.9, "candidates": []}, "candidates"),
        ({"target_precision": 0.9, "candidates": [1.2]}, "candidates"),
        ({"target_precision": 0.9, "max_candidates": 1}, "max_candidates"),
    ],
)
def test_invalid_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        tune_threshold([0.9, 0.8], [1, 0], **kwargs)


def test_invalid_data() -> None:
    with pytest.raises(ValueError, match="confidence"):
        tune_threshold([0.9, 1.2], [1, 0], target_precision=0.9)
    with pytest.raises(ValueError, match="correct"):
        tune_threshold([0.9, 0.8], [1, 2], target_precision=0.9)
    with pytest.raises(ValueError, match="same length"):
        tune_threshold([0.9, 0.8], [1], target_precision=0.9)


# ---------------------------------------------------------------- the guarantee
GRID = (np.arange(400_000) + 0.5) / 400_000 * 0.5 + 0.5  # c ~ U(0.5, 1): midpoint grid


def _q_monotone(c: np.ndarray) -> np.ndarray:
    return c - 0.02  # slightly overconfident


def _q_bad_top(c: np.ndarray) -> np.ndarray:
    # a coin above 0.996 (~8 items of 1000: always inside the first tested set, never tested
    # alone), slightly overconfident below
    return np.where(c >= 0.996, 0.5, c - 0.01)


def _true_precision(q, taus: np.ndarray) -> np.ndarray:
    """precision(tau) = E[q(c) | c >= tau] under c ~ U(0.5, 1), by a 400k-point midpoint rule."""
    qs = q(GRID)
    suffix = np.cumsum(qs[::-1])[::-1]
    start = np.searchsorted(GRID, taus, side="left")
    return suffix[start] / (GRID.size - start)


def _naive(c: np.ndarray, z: np.ndarray, target: float) -> float | None:
    """The leaky rule: lowest threshold whose empirical precision reaches the target."""
    order = np.argsort(-c)
    prec = np.cumsum(z[order]) / np.arange(1, c.size + 1)
    ok = np.flatnonzero(prec >= target)
    return None if ok.size == 0 else float(c[order][ok[-1]])


@pytest.mark.parametrize(
    ("q", "min_count"), [(_q_monotone, 30), (_q_bad_top, 100)], ids=["monotone", "bad-top-tail"]
)
def test_guarantee_holds_on_a_known_process(q, min_count: int) -> None:
    """300 calibration sets from a known process; the chosen threshold's TRUE precision falls
    below target in at most delta of the runs (plus binomial slack at the 0.999 level)."""
    rng = np.random.default_rng(20261122)
    runs, n, target, delta = 300, 1000, 0.85, 0.1
    chosen, naive = [], []
    for _ in range(runs):
        c = rng.uniform(0.5, 1.0, n)
        z = rng.uniform(size=n) < q(c)
        rep = tune_threshold(c, z, target_precision=target, delta=delta, min_count=min_count)
        chosen.append(rep.threshold)
        naive.append(_naive(c, z, target))
    taus = np.array([t for t in chosen if t is not None])
    violations = int((_true_precision(q, taus) < target).sum())
    slack = binom.ppf(0.999, runs, delta) / runs
    rate = violations / runs
    assert rate <= slack, f"violation rate {rate:.3f} > {slack:.3f} (delta {delta})"
    # not vacuous: most runs do pick a threshold ...
    assert taus.size >= 0.6 * runs
    # ... and the leaky rule, on the same data, violates far more often (the test has power)
    naive_taus = np.array([t for t in naive if t is not None])
    assert (_true_precision(q, naive_taus) < target).mean() > 0.3
    print(f"\n[{q.__name__}] violations {violations}/{runs} = {rate:.3f} (delta {delta}, "
          f"allowed {slack:.3f}); naive rule {(_true_precision(q, naive_taus) < target).mean():.3f}")


# ---------------------------------------------------------------- real data
def test_trust_or_escalate_gpt4_turbo(shared_data) -> None:
    path = shared_data / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"
    conf, correct = [], []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        p0, p1 = record["probs"]
        p_a = p0 / (p0 + p1)
        conf.append(max(p_a, 1 - p_a))
        correct.append((p_a > 0.5) == (record["preferences"]["human"] == 1))
    c, z = np.array(conf), np.array(correct)
    rep = tune_threshold(c, z, target_precision=0.85, delta=0.1)
    assert rep.n == 500
    _check_consistent(rep, c, z)
    assert 0.0 < rep.coverage < 1.0
    # fixed-sequence: the scan ended on a failure right after the chosen threshold
    assert rep.path[-1].lower_bound < 0.85 and rep.path[-2].tau == rep.threshold


def test_the_label_free_start_keeps_the_guarantee() -> None:
    """Skipping candidates that could not pass even error-free depends on counts only, so the
    realised violation rate stays <= delta (over all runs; no threshold is no violation): a
    process whose very top is a small bad block, with a small min_count so that the skip,
    not min_count, decides where the scan starts."""
    rng = np.random.default_rng(11)
    violations = found = 0
    runs = 400
    for _ in range(runs):
        c = rng.uniform(0.5, 1.0, 300)
        p_right = np.where(c > 0.998, 0.3, np.minimum(1.0, c + 0.1))
        z = rng.uniform(size=300) < p_right
        rep = tune_threshold(c, z, target_precision=0.85, delta=0.1, min_count=5)
        if rep.threshold is None:
            continue
        found += 1
        assert rep.path[0].n_accepted >= 15  # 0.1 ** (1 / 14) < 0.85: never tested below 15
        grid = np.linspace(rep.threshold, 1.0, 2001)  # c is uniform: the accepted region's truth
        truth = np.where(grid > 0.998, 0.3, np.minimum(1.0, grid + 0.1)).mean()
        violations += truth < 0.85
    print(f"label-free start: realised precision below target in {violations / runs:.3f} of "
          f"{runs} problems (target <= delta 0.1); a threshold found in {found}")
    assert found > 100
    assert violations / runs <= 0.1 + 0.03, (violations, found)
