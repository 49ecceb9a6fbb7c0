"""tune_threshold_stratified: reduction to tune_threshold, the bound's definition, the guarantee."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from scipy.stats import beta

from judgefuse.calibration import (
    ThresholdReport,
    stratified_precision_lower_bound,
    tune_threshold,
    tune_threshold_stratified,
)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_one_fully_labelled_stratum_is_tune_threshold(seed: int) -> None:
    """One stratum: the mixture weight is 1 and all of delta goes to the error rate, so the
    bound is exactly the Clopper-Pearson bound of tune_threshold; never less conservative."""
    rng = np.random.default_rng(seed)
    c = rng.beta(5, 1.5, 300)
    z = rng.uniform(size=300) < np.minimum(1.0, c + 0.15)
    plain = tune_threshold(c, z, target_precision=0.85, delta=0.1)
    strat = tune_threshold_stratified(c, z, ["review"] * 300, {"review": 300},
                                      target_precision=0.85, delta=0.1)
    assert isinstance(strat, ThresholdReport)
    assert strat.threshold == plain.threshold
    assert len(strat.path) == len(plain.path)
    for a, b in zip(strat.path, plain.path, strict=True):
        assert a.tau == b.tau and a.n_accepted == b.n_accepted
        assert a.lower_bound <= b.lower_bound + 1e-9  # never less conservative
        assert a.lower_bound == pytest.approx(b.lower_bound, abs=1e-9)
        assert a.precision == pytest.approx(b.precision, abs=1e-12)
    if plain.qualified:
        assert strat.coverage == pytest.approx(plain.coverage)
        assert strat.expected_errors == pytest.approx(plain.expected_errors)
    json.dumps(strat.as_dict())


def _bound_by_definition(acc: np.ndarray, err: np.ndarray, n: np.ndarray, big_n: np.ndarray,
                         delta: float) -> float:
    """1 - max over the corners of the a-box of sum_s alpha_s U_s, written out per stratum."""
    s = len(n)
    u = [1.0 if acc[i] == err[i] else beta.ppf(1 - delta / 2 / s, err[i] + 1, acc[i] - err[i])
         for i in range(s)]
    side = delta / 2 / s / 2
    lo = [0.0 if acc[i] == 0 else beta.ppf(side, acc[i], n[i] - acc[i] + 1) for i in range(s)]
    hi = [1.0 if acc[i] == n[i] else beta.ppf(1 - side, acc[i] + 1, n[i] - acc[i])
          for i in range(s)]
    worst = 0.0
    for corner in itertools.product(*[(lo[i], hi[i]) for i in range(s)]):
        b = np.asarray(corner) * big_n
        if b.sum() > 0:
            worst = max(worst, float(np.dot(b, u) / b.sum()))
    return 1.0 - worst


@pytest.mark.parametrize("seed", range(6))
def test_multi_stratum_bound_matches_its_definition(seed: int) -> None:
    rng = np.random.default_rng(seed)
    s = 3
    n = rng.integers(5, 200, s)
    acc = np.array([rng.integers(0, k + 1) for k in n])
    err = np.array([rng.integers(0, a + 1) for a in acc])
    big_n = n * rng.integers(1, 12, s)
    got = float(stratified_precision_lower_bound(acc[None, :], err[None, :], n, big_n,
                                                 delta=0.1)[0])
    assert got == pytest.approx(_bound_by_definition(acc, err, n, big_n, 0.1), abs=1e-9)


def test_unlabelled_stratum_only_lowers_the_bound() -> None:
    rng = np.random.default_rng(7)
    c = rng.beta(6, 1.2, 400)
    z = rng.uniform(size=400) < c
    strata = np.where(c < 0.8, "review", "auto@0.1")
    base = {"review": int((c < 0.8).sum()), "auto@0.1": int((c >= 0.8).sum())}
    a = tune_threshold_stratified(c, z, strata, base, target_precision=0.8, delta=0.1)
    b = tune_threshold_stratified(c, z, strata, {**base, "auto@0.3": 500},
                                  target_precision=0.8, delta=0.1)
    assert a.path
    # at every threshold both scans tested, the extra unlabelled stratum lowers the bound
    b_lower = {step.tau: step.lower_bound for step in b.path}
    assert all(b_lower[x.tau] <= x.lower_bound + 1e-12 for x in a.path if x.tau in b_lower)
    assert not b.qualified or (a.qualified and b.threshold >= a.threshold)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"stratum": ["x"] * 50}, "not in population"),
        ({"population": {"review": 10}}, "50 labelled verdicts but population 10"),
        ({"population": {"review": -1}}, "must be an integer >= 0"),
        ({"stratum": ["review"] * 49}, "stratum must have shape"),
    ],
)
def test_bad_input_is_refused(kwargs: dict, message: str) -> None:
    rng = np.random.default_rng(0)
    args = {"confidence": rng.uniform(0.5, 1, 50), "correct": rng.uniform(size=50) < 0.8,
            "stratum": ["review"] * 50, "population": {"review": 50}}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        tune_threshold_stratified(**args, target_precision=0.8, delta=0.1)


# ---------------------------------------------------------------- the guarantee, simulated
GRID = np.round(np.arange(0.50, 1.0001, 0.025), 3)


def _process(kind: str) -> tuple[np.ndarray, np.ndarray]:
    """A traffic distribution on a confidence grid: P(c = g) and P(correct | c = g)."""
    mass = np.exp(4.0 * (GRID - 0.5))
    mass /= mass.sum()
    if kind == "flat":  # 0.98 everywhere: a certifiable target must be certified
        return mass, np.full(GRID.size, 0.98)
    acc = np.clip(GRID - 0.02, 0.0, 1.0)
    if kind == "bad top":  # confident errors at the very top, hidden from small tests
        acc[-2:] = 0.8
    return mass, acc


def _true_precision(mass: np.ndarray, acc: np.ndarray, tau: float | None) -> float:
    if tau is None:
        return 1.0  # accepts nothing
    keep = GRID >= tau - 1e-12
    return float(np.dot(mass[keep], acc[keep]) / mass[keep].sum())


def _problems(kind: str, target: float, label_share: float, reps: int,
              seed: int = 21, min_count: int = 30) -> tuple[float, float]:
    """Violation rate and share of problems with a threshold, over resampled windows.

    Each problem: a window of 2,000 verdicts routed at tau0 = 0.85; review (c < tau0) and the
    auto-accepts audited at 25% are queued, and the annotator labels ``label_share`` of the
    queue at random. Tuned at delta 0.1; realised precision is the process's exact precision.
    """
    rng = np.random.default_rng(seed)
    mass, acc = _process(kind)
    violations = found = 0
    for _ in range(reps):
        c = GRID[rng.choice(GRID.size, size=2000, p=mass)]
        z = rng.uniform(size=2000) < acc[np.searchsorted(GRID, c)]
        auto = c >= 0.85
        labelled = np.where(auto, rng.uniform(size=2000) < 0.25, True) & (
            rng.uniform(size=2000) < label_share)
        strata = np.where(auto, "auto@0.25", "review")
        report = tune_threshold_stratified(
            c[labelled], z[labelled], strata[labelled],
            {"review": int((~auto).sum()), "auto@0.25": int(auto.sum())},
            target_precision=target, delta=0.1, min_count=min_count)
        found += report.qualified
        violations += _true_precision(mass, acc, report.threshold) < target
    return violations / reps, found / reps


@pytest.mark.parametrize(("kind", "target", "label_share"),
                         [("smooth", 0.88, 1.0), ("smooth", 0.9, 0.7), ("bad top", 0.84, 1.0)])
def test_guarantee_holds_on_stratified_windows(kind: str, target: float, label_share: float) -> None:
    """Realised precision >= target in >= 1 - delta of resampled problems (delta 0.1).

    The targets sit where the process's precision curve crosses them (smooth: 0.88 at tau
    0.75, 0.90 at 0.825; bad top: the curve peaks at 0.868 and falls to 0.80 at the top, 0.84 at tau 0.95), so
    a wrong threshold is possible. The assertion allows for simulation noise (2.5 sd at 200
    problems: +0.053).
    """
    reps = 200
    rate, found = _problems(kind, target, label_share, reps)
    print(f"{kind}, target {target}, labels {label_share:.0%}: violation rate {rate:.3f} "
          f"(target <= 0.1); threshold found in {found:.2f} of {reps} problems")
    assert rate <= 0.1 + 2.5 * np.sqrt(0.1 * 0.9 / reps)


def test_a_comfortably_met_target_is_certified() -> None:
    """Power: precision 0.98 everywhere, target 0.9: the stratified bound must pass it.

    min_count 100: the scan starts at a set of ~100 labels (with the default 30, a top set of
    ~40 labels with two errors stops the scan at once, as it does for tune_threshold).
    """
    rate, found = _problems("flat", 0.9, 1.0, 40, min_count=100)
    print(f"flat 0.98, target 0.9: threshold found in {found:.2f}, violation rate {rate:.3f}")
    assert found >= 0.75
    assert rate == 0.0


def test_a_stratum_without_verdicts_carries_no_weight() -> None:
    acc, err = np.array([[40, 3]]), np.array([[2, 0]])
    with_empty = stratified_precision_lower_bound(
        np.c_[acc, [[0]]], np.c_[err, [[0]]], [100, 10, 0], [500, 90, 0], delta=0.1)
    without = stratified_precision_lower_bound(acc, err, [100, 10], [500, 90], delta=0.1)
    assert with_empty[0] == pytest.approx(without[0], abs=1e-15)


def test_strata_labelled_in_full_are_pooled_into_one_census():
    """Two strata each labelled in full (e.g. inline labels of reviewed and of auto-accepted
    verdicts) bound like one sample of their union: exactly tune_threshold on the pooled
    labels. A sampled stratum beside them keeps its own bound."""
    import numpy as np

    from judgefuse.calibration import tune_threshold
    from judgefuse.calibration.stratified_tuning import tune_threshold_stratified

    rng = np.random.default_rng(3)
    c = rng.uniform(0.5, 1.0, 300)
    z = rng.uniform(size=300) < np.minimum(1.0, c + 0.15)
    strata = np.where(np.arange(300) % 3 == 0, "inline@auto", "inline@review")
    population = {"inline@auto": int((strata == "inline@auto").sum()),
                  "inline@review": int((strata == "inline@review").sum())}
    pooled = tune_threshold_stratified(c, z, strata, population, target_precision=0.8, delta=0.1)
    plain = tune_threshold(c, z, target_precision=0.8, delta=0.1)
    assert pooled.threshold == plain.threshold and pooled.threshold is not None
    assert pooled.lower_bound == pytest.approx(plain.lower_bound)
    # one stratum sampled (10 of 1,000 verdicts labelled): no pooling with it
    sampled = {**population, "inline@auto": population["inline@auto"] * 10}
    apart = tune_threshold_stratified(c, z, strata, sampled, target_precision=0.8, delta=0.1)
    assert apart.threshold is None or apart.threshold >= pooled.threshold
