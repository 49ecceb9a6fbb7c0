"""Label budget: the audit rate a budget buys, the half-widths it gives, the delay it implies."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration.label_budget import (
    _capped_neyman,
    expected_detection_delay,
    expected_half_width,
    plan_audit_rate,
)


def test_review_is_paid_first_and_the_rest_goes_to_audit() -> None:
    plan = plan_audit_rate(600, 400, 8000, min_rate=0.02, max_rate=0.10)
    assert plan.audit_rate == pytest.approx(200 / 8000)
    assert plan.binding == "budget"
    assert plan.labels_per_day == pytest.approx(600)
    assert plan_audit_rate(5000, 400, 8000, max_rate=0.10).binding == "max_rate"
    assert plan_audit_rate(500, 400, 8000, min_rate=0.02).binding == "min_rate"
    short = plan_audit_rate(300, 400, 8000, min_rate=0.02)
    assert short.binding == "review_over_budget" and short.audit_rate == 0.02


def test_capped_neyman_is_proportional_to_size_times_sd_and_respects_caps() -> None:
    assert _capped_neyman(100, (1000, 1000), (0.5, 0.3)) == pytest.approx((62.5, 37.5))
    # the small stratum is capped at its size; the rest goes to the other one
    assert _capped_neyman(500, (100, 1000), (0.5, 0.1)) == pytest.approx((100, 400))
    assert sum(_capped_neyman(10_000, (100, 1000), (0.5, 0.3))) == pytest.approx(1100)


def test_without_review_labels_a_capped_audit_rate_hands_the_rest_to_review() -> None:
    plan = plan_audit_rate(600, 400, 8000, review_labelled=False, sd_review=0.5, sd_auto=0.3,
                           max_rate=0.05)
    assert plan.binding == "max_rate" and plan.audit_rate == 0.05
    assert plan.review_labels_per_day == pytest.approx(200)
    assert plan.labels_per_day == pytest.approx(600)


def test_neyman_split_minimises_the_stratified_variance() -> None:
    """Among all splits of the same total, the capped Neyman one gives the smallest half-width."""
    review, auto, budget = 400.0, 8000.0, 600.0
    plan = plan_audit_rate(budget, review, auto, review_labelled=False, sd_review=0.5, sd_auto=0.3)
    best = expected_half_width(review, auto, plan.audit_rate, review_rate=plan.review_rate).population
    for n_review in np.linspace(1, 399, 40):
        other = expected_half_width(review, auto, (budget - n_review) / auto,
                                    review_rate=n_review / review).population
        assert best <= other + 1e-12


def test_half_width_matches_the_stratified_formula() -> None:
    hw = expected_half_width(400, 8000, 0.025, sd_review=0.5, sd_auto=0.3, days=7)
    n_auto = 8000 * 7 * 0.025
    w_auto = 8000 / 8400
    z = 1.959963984540054
    assert hw.auto_accept == pytest.approx(z * 0.3 / math.sqrt(n_auto) * math.sqrt(1 - 0.025))
    assert hw.population == pytest.approx(w_auto * hw.auto_accept)  # review is a census
    assert expected_half_width(400, 8000, 0.0).auto_accept == math.inf


def test_the_simulated_delay_matches_the_benchmark_scale_and_the_path_overstates_it() -> None:
    sim = expected_detection_delay(0.05, 8000, target=0.85, precision_before=0.90, drop=0.15,
                                   change_after_labels=500, streams=100)
    path = expected_detection_delay(0.05, 8000, target=0.85, precision_before=0.90, drop=0.15,
                                    change_after_labels=500, method="path")
    assert sim.detected >= 0.95
    assert 150 < sim.labels < path.labels < 600
    assert sim.verdicts == pytest.approx(sim.labels / 0.05)
    assert sim.days == pytest.approx(sim.labels / (0.05 * 8000))
    # a bigger drop is caught sooner; a drop that stays above the target is never an alarm
    big = expected_detection_delay(0.05, 8000, target=0.85, drop=0.40, change_after_labels=500,
                                   method="path")
    assert big.labels < path.labels / 3
    assert expected_detection_delay(0.05, 8000, target=0.85, drop=0.02).labels == math.inf


@pytest.mark.parametrize(("call", "match"), [
    (lambda: plan_audit_rate(-1, 10, 10), "budget_per_day"),
    (lambda: plan_audit_rate(10, 10, 0), "auto_per_day"),
    (lambda: plan_audit_rate(10, 10, 10, min_rate=0.2, max_rate=0.1), "min_rate"),
    (lambda: plan_audit_rate(10, 10, 10, max_rate=1.5), "max_rate"),
    (lambda: expected_half_width(10, 10, 0.1, confidence=1.0), "confidence"),
    (lambda: expected_half_width(10, 10, float("nan")), "audit_rate"),
    (lambda: expected_detection_delay(0.0, 10, target=0.9), "audit_rate"),
    (lambda: expected_detection_delay(0.1, 10, target=0.9, method="guess"), "method"),
    (lambda: expected_detection_delay(0.1, 10, target=1.2), "target"),
])
def test_bad_arguments_raise(call, match) -> None:
    with pytest.raises(ValueError, match=match):
        call()
