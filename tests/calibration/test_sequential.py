"""PrecisionMonitor and the beta-mixture confidence sequences: closed form, time-uniform
coverage on seeded streams, detection, state round-trips, scalar/vectorised agreement, errors."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import beta as beta_dist

from judgefuse.calibration.mixture_bound import (
    log_evalue_above,
    log_evalue_below,
    mixture_lower,
    mixture_upper,
)
from judgefuse.calibration.restarts import (
    SLOTS,
    RestartedMean,
    level_count,
    log_threshold,
    window_starts,
)
from judgefuse.calibration.sequential import (
    PrecisionMonitor,
    first_crossing,
    precision_alarm_times,
    precision_prior,
)


def _streams(p_before: float, p_after: float, change: np.ndarray, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.where(np.arange(n)[None, :] < change[:, None], p_before, p_after)
    return rng.uniform(size=p.shape) < p


# ---------------------------------------------------------------- the mixture e-value
@pytest.mark.parametrize(("s", "n", "m", "prior"), [
    (7, 10, 0.85, (1.0, 1.0)), (70, 100, 0.85, (1.0, 1.0)), (3.4, 9, 0.5, (0.5, 0.5)),
    (40, 45, 0.8, (8.5, 1.5)), (0, 5, 0.3, (1.0, 1.0)),
])
def test_closed_form_equals_the_mixture_integral(s, n, m, prior) -> None:
    """The incomplete-beta formula is the integral over alternatives below (above) m."""
    f = n - s
    def lr(q: float) -> float:
        return (q / m) ** s * ((1 - q) / (1 - m)) ** f * beta_dist.pdf(q, *prior)
    below = quad(lr, 0, m, limit=200)[0]
    above = quad(lr, m, 1, limit=200)[0]
    assert float(log_evalue_below(s, n, m, prior=prior)) == pytest.approx(math.log(below), abs=1e-7)
    assert float(log_evalue_above(s, n, m, prior=prior)) == pytest.approx(math.log(above), abs=1e-7)


def test_evalue_rises_with_m_above_the_mean() -> None:
    grid = np.linspace(0.7, 0.999, 300)
    log_e = log_evalue_below(70, 100, grid)
    assert np.all(np.diff(log_e) > 0)


def test_inverted_bounds_sit_on_the_boundary() -> None:
    thr = math.log(1 / 0.05)
    up = float(mixture_upper(170, 200, thr))
    lo = float(mixture_lower(170, 200, thr))
    assert lo < 0.85 < up
    assert float(log_evalue_below(170, 200, up)) == pytest.approx(thr, abs=1e-6)
    assert float(log_evalue_above(170, 200, lo)) == pytest.approx(thr, abs=1e-6)
    # nothing wrong yet: no precision below 1 can be excluded from above
    assert float(mixture_upper(30, 30, thr)) == 1.0
    assert float(mixture_lower(0, 30, thr)) == 0.0


# ---------------------------------------------------------------- time-uniform coverage
@pytest.mark.parametrize(("p", "prior"), [
    (0.85, (1.0, 1.0)), (0.5, (1.0, 1.0)), (0.97, (1.0, 1.0)), (0.85, precision_prior(0.85)),
])
def test_bounds_contain_the_true_mean_at_all_times(p: float, prior: tuple[float, float]) -> None:
    """Seeded iid streams read after every label: the share of streams whose bounds EVER
    exclude the true mean (either side, any candidate) stays below alpha."""
    alpha = 0.1
    x = np.random.default_rng(int(p * 100)).uniform(size=(200, 800)) < p
    upper_missed = first_crossing(x, p, side="below", alpha=alpha, prior=prior) > 0
    lower_missed = first_crossing(x, p, side="above", alpha=alpha, prior=prior) > 0
    rate = float(np.mean(upper_missed | lower_missed))
    print(f"p={p}: streams whose bounds ever missed p: {rate:.3f} (each side <= alpha = {alpha})")
    assert upper_missed.mean() <= alpha and lower_missed.mean() <= alpha
    assert rate <= 2 * alpha


def test_monitor_bounds_cover_and_narrow() -> None:
    """Reported bounds at checkpoints contain p in nearly every stream and get informative."""
    rng = np.random.default_rng(5)
    misses, widths = 0, []
    for _ in range(25):
        mon = PrecisionMonitor(0.85, alpha=0.05)
        for z in rng.uniform(size=900) < 0.9:
            mon.update(bool(z))
            if mon.labels % 300 == 0:
                est, lo, up = mon.bounds()
                misses += not (lo <= 0.9 <= up)
                assert lo <= est <= up
        widths.append(up - lo)
    assert misses <= 2  # 75 checks, each side's miss probability <= alpha
    assert np.median(widths) < 0.1


def test_no_false_alarm_when_precision_moves_but_stays_above_target() -> None:
    """The null is 'never below target': a precision that drifts 0.95 -> 0.85 is not an alarm."""
    change = np.full(400, 300)
    x = _streams(0.95, 0.85, change, 1500, seed=11)
    alarms = precision_alarm_times(x, 0.85, alpha=0.05)
    assert np.mean(alarms > 0) <= 0.05


# ---------------------------------------------------------------- detection
def test_a_sharp_drop_is_detected_quickly() -> None:
    change = np.full(50, 500)
    x = _streams(0.95, 0.4, change, 1000, seed=3)
    alarms = precision_alarm_times(x, 0.85)
    assert np.all(alarms > 500)
    assert np.max(alarms - 500) <= 100


def test_a_collapse_is_caught_within_a_few_dozen_labels() -> None:
    """The shortest restart window is 64 labels, yet a collapse to 0.3 shows in ~35."""
    change = np.full(100, 700)
    x = _streams(0.92, 0.3, change, 900, seed=13)
    delay = precision_alarm_times(x, 0.85) - 700
    assert np.all(delay > 0)
    print(f"collapse to 0.3: median delay {np.median(delay):.0f}, max {delay.max()}")
    assert np.median(delay) <= 45 and delay.max() <= 80


def test_a_late_drop_is_caught_faster_than_the_cumulative_sequence() -> None:
    """Reference run: 0.90 -> 0.70 after 200-1,000 good labels; a single sequence since tuning
    had median delay ~970 labels. Restarts must do far better and catch nearly all drops."""
    rng = np.random.default_rng(8)
    change = rng.integers(200, 1001, 200)
    x = _streams(0.90, 0.70, change, 3000, seed=9)
    alarms = precision_alarm_times(x, 0.85)
    detected = alarms > change
    delay = np.median((alarms - change)[detected])
    print(f"median delay {delay:.0f} labels, detected {detected.mean():.3f} within 3000")
    assert detected.mean() >= 0.98
    assert delay < 200
    # the budget's union bound: alarms before the change are rare
    assert np.mean((alarms > 0) & (alarms <= change)) <= 0.05


# ---------------------------------------------------------------- one formula, two runners
def test_scalar_and_vectorised_monitors_alarm_at_the_same_label() -> None:
    rng = np.random.default_rng(21)
    change = rng.integers(0, 400, 20)
    x = _streams(0.92, 0.72, change, 700, seed=22)
    for min_level in (2, 5):
        vec = precision_alarm_times(x, 0.85, alpha=0.05, min_level=min_level)
        scalar = []
        for row in x:
            mon = PrecisionMonitor(0.85, alpha=0.05, min_level=min_level)
            mon.update_many(row.tolist())
            scalar.append(mon.alarmed_at or 0)
        assert vec.tolist() == scalar
        assert (vec > 0).sum() >= 15


def test_engine_sums_equal_the_windows_they_stand_for() -> None:
    rng = np.random.default_rng(4)
    x = rng.uniform(size=700)
    eng = RestartedMean(min_level=2, squares=True)
    for t, v in enumerate(x, start=1):
        eng.update(float(v))
        levels, starts, sums, squares, counts = eng.windows()
        assert len(eng.sums) == level_count(t, 2)
        for lev, s, tot, sq, c in zip(levels, starts, sums, squares, counts, strict=True):
            assert s in window_starts(t, int(lev))
            assert c == t - s
            assert tot == pytest.approx(x[s:t].sum(), abs=1e-9)
            assert sq == pytest.approx((x[s:t] ** 2).sum(), abs=1e-9)
    assert RestartedMean.from_state(eng.to_state()).to_state() == eng.to_state()


def test_work_and_state_grow_with_the_log_of_the_label_count() -> None:
    """O(log t) per update: the windows after 2^16 labels are SLOTS per level, 12 levels."""
    eng = RestartedMean(min_level=6)
    for v in np.random.default_rng(0).uniform(size=1 << 16) < 0.9:
        eng.update(float(v))
    assert len(eng.sums) == level_count(1 << 16, 6) == 12
    assert len(eng.windows().starts) <= SLOTS * len(eng.sums)
    assert len(json.dumps(eng.to_state())) < 1200


def test_alarm_is_the_upper_bound_falling_below_target() -> None:
    x = _streams(0.95, 0.5, np.array([200]), 400, seed=2)[0]
    mon = PrecisionMonitor(0.85)
    for z in x:
        mon.update(bool(z))
        if mon.alarm():
            break
        assert mon.bounds()[2] >= 0.85 - 1e-9
    assert mon.alarm()
    assert mon.bounds()[2] < 0.85
    assert mon.report()["window_start"] >= 128  # the binding window started after the good past


def test_budget_of_all_candidates_sums_to_alpha() -> None:
    """sum over levels and start indices of alpha_(k,i) is alpha (telescoping), checked far out."""
    levels = np.arange(5, 5 + 41)[:, None]
    idx = np.arange(0, 4000)[None, :]
    budget = np.exp(-log_threshold(0.05, levels, idx << levels, 5))
    assert budget.sum() == pytest.approx(0.05 * (1 - 1 / 42) * (1 - 1 / 4001), rel=1e-9)


# ---------------------------------------------------------------- state
def test_state_round_trips_exactly_through_json() -> None:
    rng = np.random.default_rng(6)
    mon = PrecisionMonitor(0.8, alpha=0.02, prior=(2.0, 0.5), min_level=3)
    mon.update_many((rng.uniform(size=777) < 0.83).tolist())
    state = mon.to_state()
    text = json.dumps(state)
    assert len(text) < 600
    twin = PrecisionMonitor.from_state(json.loads(text))
    assert twin.to_state() == state
    assert twin.bounds() == mon.bounds()
    more = (rng.uniform(size=500) < 0.6).tolist()
    mon.update_many(more)
    twin.update_many(more)
    assert twin.to_state() == mon.to_state()
    assert twin.alarmed_at == mon.alarmed_at is not None


# ---------------------------------------------------------------- bad arguments
@pytest.mark.parametrize(("kwargs", "match"), [
    ({"target": 0.0}, "target"), ({"target": 1.0}, "target"), ({"target": float("nan")}, "target"),
    ({"target": True}, "target"), ({"target": "0.9"}, "target"),
    ({"target": 0.9, "alpha": 0.0}, "alpha"), ({"target": 0.9, "alpha": 1.5}, "alpha"),
    ({"target": 0.9, "prior": (0.0, 1.0)}, "prior"), ({"target": 0.9, "prior": (1.0,)}, "prior"),
    ({"target": 0.9, "min_level": -1}, "min_level"), ({"target": 0.9, "min_level": 2.5}, "min_level"),
])
def test_bad_arguments_raise(kwargs, match) -> None:
    target = kwargs.pop("target")
    with pytest.raises(ValueError, match=match):
        PrecisionMonitor(target, **kwargs)


@pytest.mark.parametrize("label", [2, 0.5, "yes", None])
def test_labels_must_be_bool(label) -> None:
    with pytest.raises(ValueError, match="correct must be a bool"):
        PrecisionMonitor(0.9).update(label)


def test_bad_states_and_arrays_raise() -> None:
    good = PrecisionMonitor(0.9).to_state()
    with pytest.raises(ValueError, match="kind"):
        PrecisionMonitor.from_state({**good, "kind": "other"})
    with pytest.raises(ValueError, match="version"):
        PrecisionMonitor.from_state({**good, "version": 99})
    with pytest.raises(ValueError, match="inconsistent state"):
        PrecisionMonitor.from_state({**good, "t": 5000})
    with pytest.raises(ValueError, match="lacks field"):
        PrecisionMonitor.from_state({k: v for k, v in good.items() if k != "alpha"})
    with pytest.raises(ValueError, match="shape"):
        precision_alarm_times(np.ones(10), 0.9)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        first_crossing(np.full((2, 3), 1.5), 0.9)
    with pytest.raises(ValueError, match="side"):
        first_crossing(np.ones((2, 3)), 0.9, side="up")
