"""Active audits as confidence bands (judgefuse.calibration.audit_bands)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration import CalibrationAccumulator
from judgefuse.calibration.audit_bands import RATE_STEPS, AuditBands, plan_audit_bands, width_ratio_bound
from judgefuse.calibration.stratified import StratumData, precision_estimate


def test_rates_average_to_the_planned_rate_over_the_reference_traffic() -> None:
    rng = np.random.default_rng(0)
    c = rng.uniform(0.7, 1.0, 5000)
    bands = plan_audit_bands(c, mean_rate=0.1, bands=5)
    assert len(bands.rates) == 5
    # rates lie on a grid (steps of 2**(1/RATE_STEPS)): the mean is the nearer of two steps
    assert bands.rates_of(c).mean() == pytest.approx(0.1, abs=0.1 * (2 ** (1 / RATE_STEPS) - 1) / 2)


def test_replans_on_similar_traffic_land_on_a_few_rates() -> None:
    """Each rate in force names a ledger stratum, and the service replans every few minutes:
    twenty plans from resampled reference traffic (labels among them) share a few rates, all on
    the grid around the mean rate, so a window's audit strata stay few and large (rounded to 4
    decimals, every plan named three new strata)."""
    rng = np.random.default_rng(2)
    pool_c = rng.uniform(0.8, 1.0, 5000)
    pool_y = (rng.uniform(size=5000) < pool_c).astype(float)
    rates: set[float] = set()
    for _ in range(20):
        idx = rng.integers(0, 5000, 1000)
        y = np.where(rng.uniform(size=1000) < 0.1, pool_y[idx], math.nan)
        rates |= set(plan_audit_bands(pool_c[idx], y, mean_rate=0.1, bands=3, floor_share=0.5).rates)
    assert len(rates) <= 5, sorted(rates)
    steps = [math.log2(r / 0.1) * RATE_STEPS for r in rates]
    assert all(abs(k - round(k)) < 1e-2 for k in steps), sorted(rates)


def test_less_certain_bands_are_audited_more_and_the_floor_holds() -> None:
    rng = np.random.default_rng(1)
    c = rng.uniform(0.6, 1.0, 5000)
    bands = plan_audit_bands(c, mean_rate=0.1, bands=4, floor_share=0.3)
    # the confidence taken as calibrated: sqrt(p (1 - p)) falls as p rises over (0.5, 1)
    assert list(bands.rates) == sorted(bands.rates, reverse=True)
    assert min(bands.rates) >= 0.03 - 1e-4
    assert bands.rates[0] > 1.5 * bands.rates[-1]


def test_labels_move_a_band_s_rate() -> None:
    """Two bands; the surer one's labels say it is often wrong: it is audited more than with
    labels that agree with its confidence, and more than the less sure band."""
    c = np.r_[np.full(60, 0.80), np.full(140, 0.95)]
    right = np.ones(200)
    wrong_top = np.r_[np.ones(60), np.ones(70), np.zeros(70)]
    calm = plan_audit_bands(c, right, mean_rate=0.1, bands=2)
    alarmed = plan_audit_bands(c, wrong_top, mean_rate=0.1, bands=2)
    assert alarmed.rates[1] > calm.rates[1]
    assert alarmed.rates[1] > alarmed.rates[0]


def test_no_spread_or_a_full_rate_is_one_uniform_band() -> None:
    same = plan_audit_bands(np.full(50, 0.9), mean_rate=0.2)
    assert same.edges == () and same.rates == (0.2,)
    full = plan_audit_bands(np.linspace(0.6, 1.0, 50), mean_rate=1.5, bands=3)
    assert set(full.rates) == {1.0}


def test_a_verdict_takes_its_band_s_rate_and_the_plan_round_trips() -> None:
    bands = AuditBands(edges=(0.8, 0.9), rates=(0.3, 0.1, 0.05), mean_rate=0.1)
    assert [bands.rate(c) for c in (0.5, 0.8, 0.85, 0.9, 1.0)] == [0.3, 0.1, 0.1, 0.05, 0.05]
    assert list(bands.rates_of(np.array([0.5, 0.8, 0.95]))) == [0.3, 0.1, 0.05]
    assert AuditBands.from_dict(bands.as_dict()) == bands


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": [], "mean_rate": 0.1}, "non-empty"),
        ({"confidence": [0.9, math.nan], "mean_rate": 0.1}, "finite"),
        ({"confidence": [0.9], "mean_rate": 0.0}, "mean_rate"),
        ({"confidence": [0.9], "mean_rate": 0.1, "bands": 0}, "bands"),
        ({"confidence": [0.9], "mean_rate": 0.1, "floor_share": 0.0}, "floor_share"),
        ({"confidence": [0.9, 0.8], "correct": [1.0], "mean_rate": 0.1}, "shape"),
    ],
)
def test_bad_plans_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_audit_bands(**kwargs)


def test_bad_bands_are_refused() -> None:
    with pytest.raises(ValueError, match="rates"):
        AuditBands(edges=(0.9,), rates=(0.1,), mean_rate=0.1)
    with pytest.raises(ValueError, match="increase"):
        AuditBands(edges=(0.9, 0.8), rates=(0.1, 0.1, 0.1), mean_rate=0.1)
    with pytest.raises(ValueError, match=r"\(0, 1\]"):
        AuditBands(edges=(0.9,), rates=(0.0, 0.1), mean_rate=0.1)


def test_width_ratio_bound_by_hand() -> None:
    # half the verdicts certain (v = 0), half at p = 0.5 (v = 1/4): (E sqrt v)^2 / E v = (1/4)^2 / (1/8)
    assert width_ratio_bound([1.0, 0.5]) == pytest.approx(math.sqrt(0.5))
    assert width_ratio_bound([0.8, 0.8, 0.8]) == pytest.approx(1.0)
    assert width_ratio_bound([1.0, 0.0]) == 1.0


def test_precision_over_band_strata_covers() -> None:
    """Audits drawn at each band's rate, each band a stratum of the estimate (as the ledger keeps
    one ``auto@{rate}`` stratum per rate): the 95% precision interval covers the window's own
    precision. Target >= 0.93; the assertion allows ~2.5 simulation sd at 300 windows."""
    acc = CalibrationAccumulator(fine_bins=100)
    rng = np.random.default_rng(7)
    plan_c = rng.uniform(0.7, 1.0, 400)
    bands = plan_audit_bands(plan_c, (rng.uniform(size=400) < plan_c).astype(float), mean_rate=0.1, bands=4)
    hits = counted = 0
    for _ in range(300):
        c = rng.uniform(0.7, 1.0, 2000)
        z = (rng.uniform(size=c.size) < c).astype(float)
        rates = bands.rates_of(c)
        audited = rng.uniform(size=c.size) < rates
        strata = [
            StratumData(
                f"auto@{r:g}",
                int((rates == r).sum()),
                acc.increments_many(c[audited & (rates == r)], z[audited & (rates == r)]),
            )
            for r in np.unique(rates)
        ]
        if any(s.fields == {} for s in strata):
            continue
        counted += 1
        iv = precision_estimate(strata, accumulator=acc)
        hits += iv.lower - 1e-12 <= z.mean() <= iv.upper + 1e-12
    print(f"band strata: coverage {hits / counted:.3f} over {counted} windows (target >= 0.93)")
    assert counted >= 250
    assert hits / counted >= 0.93 - 0.035
