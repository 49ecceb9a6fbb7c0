"""Judge drift detectors: the Bernstein e-value's inequality, false alarms, detection, state."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judgefuse.calibration.bernstein_bound import (
    LAMBDAS,
    bernstein_bounds,
    log_evalue_bernstein,
)
from judgefuse.calibration.drift import BrierDrift, MeanShiftDetector, VoteDrift
from judgefuse.calibration.mixture_bound import mixture_lower, mixture_upper


def test_fan_inequality_holds_on_the_lambda_grid() -> None:
    """exp(l xi - psi(l) xi^2) <= 1 + l xi for xi >= -1: what makes each factor a supermartingale."""
    xi = np.linspace(-1.0, 1.0, 4001)[:, None]
    lam = LAMBDAS[None, :]
    psi = -np.log1p(-lam) - lam
    assert np.all(np.exp(lam * xi - psi * xi**2) <= 1.0 + lam * xi + 1e-12)


def test_bernstein_evalue_is_the_mixture_of_its_factors() -> None:
    x = np.random.default_rng(0).beta(6, 2, size=50)
    m = 0.8
    direct = np.mean([np.prod(np.exp(lam * (m - x) - (-math.log1p(-lam) - lam) * (m - x) ** 2))
                      for lam in LAMBDAS])
    three_sums = log_evalue_bernstein(x.sum(), (x**2).sum(), x.size, m, side="below")
    assert float(three_sums) == pytest.approx(math.log(direct), rel=1e-9)


def test_bernstein_bounds_adapt_to_a_small_spread() -> None:
    """Confidences near 0.75 with sd ~0.1: much tighter than the Bernoulli-worst-case mixture."""
    x = np.random.default_rng(1).beta(13, 4.3, size=2000)
    thr = math.log(40)
    lo, up = bernstein_bounds(x.sum(), (x**2).sum(), x.size, thr)
    assert lo <= x.mean() <= up
    beta_width = mixture_upper(x.sum(), x.size, thr) - mixture_lower(x.sum(), x.size, thr)
    assert (up - lo) < 0.5 * beta_width


def _feed(det, values) -> None:
    for v in values:
        det.update(float(v))


def test_stable_streams_rarely_alarm() -> None:
    rng = np.random.default_rng(2)
    alarms = 0
    for _ in range(40):
        det = MeanShiftDetector(200, alpha=0.1)
        _feed(det, rng.beta(6, 2, size=1000))
        alarms += det.alarm()
    assert alarms <= 4  # alpha = 0.1 of 40 streams


def test_a_shift_is_detected_with_its_direction() -> None:
    rng = np.random.default_rng(3)
    up = MeanShiftDetector(300)
    _feed(up, rng.beta(6, 2, size=300))  # mean 0.75
    _feed(up, rng.beta(9, 1, size=600))  # mean 0.90
    assert up.alarm() and up.direction == "up"
    assert up.alarmed_at <= 200
    rep = up.report()
    assert rep["recent_interval"][0] > rep["reference_interval"][1]


class _ScanEveryUpdate(MeanShiftDetector):
    """The detector without its skip: the windows are scanned after every observation."""

    def update(self, x: float) -> None:
        self._quiet = 0
        super().update(x)


@pytest.mark.parametrize("kind", ["votes", "confidences"])
def test_skipping_quiet_updates_alarms_exactly_when_scanning_every_update(kind: str) -> None:
    """The skip may only leave out scans that could not alarm: on 60 streams (steady, drifting
    up or down by various amounts at various times, 0/1 votes and real-valued confidences) the
    alarm comes at the same observation in the same direction as with a scan every time."""
    rng = np.random.default_rng(11 if kind == "votes" else 12)
    alarms = 0
    for i in range(60):
        before, after = rng.uniform(0.3, 0.8), rng.uniform(0.2, 0.9) if i % 3 else None
        change = int(rng.integers(100, 1500))
        means = np.where(np.arange(2500) < change, before, before if after is None else after)
        x = ((rng.uniform(size=2500) < means).astype(float) if kind == "votes"
             else np.clip(rng.normal(means, 0.08), 0.0, 1.0))
        fast, slow = MeanShiftDetector(300, alpha=0.05), _ScanEveryUpdate(300, alpha=0.05)
        _feed(fast, x)
        _feed(slow, x)
        assert (fast.alarmed_at, fast.direction) == (slow.alarmed_at, slow.direction), i
        assert fast.to_state() == slow.to_state()
        alarms += fast.alarm()
    assert 10 <= alarms < 60  # both kinds of stream were there: alarms and none


def test_brier_drift_flags_a_judge_turned_overconfident() -> None:
    rng = np.random.default_rng(4)
    det = BrierDrift(300)
    for i in range(1200):
        c = rng.uniform(0.6, 1.0)
        right = rng.uniform() < (c if i < 300 else c - 0.3)
        det.update(c, bool(right))
    assert det.alarm()
    assert det.report()["direction"] == "up"


def test_vote_drift_flags_a_position_bias_and_stays_quiet_without_one() -> None:
    rng = np.random.default_rng(5)
    quiet, biased = VoteDrift(400), VoteDrift(400)
    for i in range(1400):
        conf = float(rng.uniform(0.5, 1.0))
        quiet.update("A" if rng.uniform() < 0.5 else "B", conf)
        p_a = 0.5 if i < 400 else 0.75
        biased.update("A" if rng.uniform() < p_a else "B", conf)
    quiet.update(None, None)
    assert not quiet.alarm() and quiet.invalid == 1
    assert biased.alarm() and biased.share_a.direction == "up" and not biased.confidence.alarm()


def test_states_round_trip_through_json() -> None:
    rng = np.random.default_rng(6)
    brier, votes = BrierDrift(100), VoteDrift(100)
    for _ in range(333):
        c = float(rng.uniform(0.5, 1.0))
        brier.update(c, bool(rng.uniform() < c))
        votes.update("A" if rng.uniform() < 0.5 else "B", c)
    for det, cls in ((brier, BrierDrift), (votes, VoteDrift)):
        state = det.to_state()
        twin = cls.from_state(json.loads(json.dumps(state)))
        assert twin.to_state() == state
        assert twin.report() == det.report()


@pytest.mark.parametrize(("call", "match"), [
    (lambda: MeanShiftDetector(0), "reference_size"),
    (lambda: MeanShiftDetector(10, alpha=2), "alpha"),
    (lambda: MeanShiftDetector(10).update(1.5), "x must be"),
    (lambda: MeanShiftDetector(10).update(float("nan")), "x must be"),
    (lambda: BrierDrift(10).update(0.7, "yes"), "correct"),
    (lambda: BrierDrift(10).update(7, True), "confidence"),
    (lambda: VoteDrift(10).update("C", 0.7), "choice"),
    (lambda: VoteDrift(10).update("A", None), "confidence"),
    (lambda: BrierDrift.from_state({"kind": "vote_drift"}), "brier_drift"),
    (lambda: MeanShiftDetector.from_state({"kind": "mean_shift", "version": 1}), "lacks"),
])
def test_bad_arguments_raise(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()
