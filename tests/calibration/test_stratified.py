"""Stratified population estimates: exact against a direct weighted computation, and coverage."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from judgefuse.calibration import (
    TH_RANGE,
    CalibrationAccumulator,
    Interval,
    StratumData,
    population_estimates,
    precision_estimate,
    summarize,
)

ACC = CalibrationAccumulator()
# coverage simulations: 100 fine bins read 10x faster and change no accuracy/precision value
SMALL = CalibrationAccumulator(fine_bins=100)


def _stratum(name: str, population: int, c: np.ndarray, z: np.ndarray,
             acc: CalibrationAccumulator = ACC) -> StratumData:
    return StratumData(name, population, acc.increments_many(c, z) if c.size else {})


def _stream(seed: int = 0) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    """Three strata: review (low confidence, 70% labelled), two audit rates (high confidence)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, size, lo, hi, share in (("review", 300, 0.5, 0.9, 0.7),
                                      ("auto@0.1", 500, 0.85, 1.0, 0.1),
                                      ("auto@0.3", 200, 0.9, 1.0, 0.3)):
        c = rng.uniform(lo, hi, size)
        z = (rng.uniform(size=size) < c - 0.05).astype(float)
        labelled = rng.uniform(size=size) < share
        out[name] = (size, c[labelled], z[labelled])
    return out


def _by_hand(stream: dict[str, tuple[int, np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Each labelled item weighted N_s / n_s, metrics written out with numpy."""
    c = np.concatenate([v[1] for v in stream.values()])
    z = np.concatenate([v[2] for v in stream.values()])
    w = np.concatenate([np.full(v[1].size, v[0] / v[1].size) for v in stream.values()])
    total = w.sum()
    bins = np.minimum(np.floor(c * 10).astype(int), 9)  # continuous draws: no item on an edge
    ece = sum(abs(np.sum(w[bins == b] * (z[bins == b] - c[bins == b]))) for b in range(10)) / total
    high, low = c >= 0.9 - 1e-9, c <= 0.1 + 1e-9
    th = 0.0
    for part in (high, low):
        if part.any():
            acc = np.sum(w[part] * z[part]) / np.sum(w[part])
            th += (math.exp(acc - 0.5) - 1.0) * 100.0 * np.sum(w[part]) / total
    return {
        "accuracy": float(np.sum(w * z) / total),
        "ece": float(ece),
        "brier": float(np.sum(w * (c - z) ** 2) / total),
        "th_score": 0.5 * th,
    }


def test_estimates_equal_a_direct_weighted_computation() -> None:
    stream = _stream()
    strata = [_stratum(name, *v) for name, v in stream.items()]
    est = population_estimates(strata)
    expected = _by_hand(stream)
    for key, value in expected.items():
        assert est[key].estimate == pytest.approx(value, abs=1e-9), key
        assert est[key].lower <= est[key].estimate <= est[key].upper, key
        assert est[key].labels == sum(v[1].size for v in stream.values())
    auto = {k: v for k, v in stream.items() if k.startswith("auto")}
    precision = precision_estimate([_stratum(name, *v) for name, v in auto.items()])
    assert precision.estimate == pytest.approx(_by_hand(auto)["accuracy"], abs=1e-9)


def test_one_fully_labelled_stratum_is_the_plain_metrics() -> None:
    rng = np.random.default_rng(3)
    c = rng.beta(4, 1.5, 400)
    z = (rng.uniform(size=400) < c).astype(float)
    est = population_estimates([_stratum("review", 400, c, z)])
    plain = summarize(c, z)
    for key in ("accuracy", "ece", "brier", "th_score"):
        assert est[key].estimate == pytest.approx(plain[key], abs=1e-9), key
        # every verdict labelled: the window's value is known, the interval is a point
        assert est[key].lower == pytest.approx(plain[key], abs=1e-9), key
        assert est[key].upper == pytest.approx(plain[key], abs=1e-9), key


def test_a_stratum_with_no_verdicts_changes_nothing() -> None:
    stream = _stream(1)
    strata = [_stratum(name, *v) for name, v in stream.items()]
    with_empty = population_estimates([*strata, StratumData("auto@0.5", 0, {})])
    without = population_estimates(strata)
    assert with_empty == without


def test_no_labels_is_nan_never_an_error() -> None:
    est = population_estimates([StratumData("review", 40, {}), StratumData("auto@0.1", 60, {})])
    for value in est.values():
        assert math.isnan(value.estimate) and math.isnan(value.lower) and math.isnan(value.upper)
        assert value.labels == 0
        assert value.as_dict()["estimate"] is None
    assert math.isnan(precision_estimate([]).estimate)
    assert json.dumps(precision_estimate([]).as_dict())  # JSON-ready


def test_a_stratum_with_verdicts_but_no_labels_widens_and_is_named() -> None:
    stream = _stream(2)
    n_r, c_r, z_r = stream["review"]
    labelled = [_stratum("review", n_r, c_r, z_r)]
    alone = population_estimates(labelled)["accuracy"]
    est = population_estimates([*labelled, StratumData("auto@0.1", n_r, {})])
    acc = est["accuracy"]
    assert math.isnan(acc.estimate)
    assert "auto@0.1" in acc.method
    # the unlabelled half may be all wrong or all right: its share 1/2 is added to the range
    assert acc.lower <= alone.lower / 2 + 1e-12
    assert acc.upper >= alone.upper / 2 + 0.5 - 1e-12
    assert (est["ece"].lower, est["ece"].upper) == (0.0, 1.0)
    assert (est["th_score"].lower, est["th_score"].upper) == TH_RANGE
    assert est["brier"].upper - est["brier"].lower >= 0.5 - 1e-12


@pytest.mark.parametrize(
    ("strata", "message"),
    [
        ([StratumData("review", 1, {"n700": 2, "k700": 1, "c700": 3 * 2**31})], "population 1"),
        ([StratumData("a", 5, {}), StratumData("a", 6, {})], "listed twice"),
        ([StratumData("a", -1, {})], "population must be"),
        ([StratumData("a", 5, {"bogus": 1})], "unknown calibration fields"),
    ],
)
def test_inconsistent_input_is_refused_naming_the_stratum(strata: list, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        population_estimates(strata)


def test_interval_as_dict() -> None:
    iv = Interval(0.8, 0.7, math.nan, 12, "m")
    assert iv.as_dict() == {"estimate": 0.8, "lower": 0.7, "upper": None, "labels": 12,
                            "method": "m"}


def _wald(parts: list[tuple[int, int, int]], z: float = 1.96) -> tuple[float, float]:
    """Plain stratified Wald with finite-population correction, for comparison only."""
    total = sum(p[0] for p in parts)
    est = sum(big / total * k / n for big, n, k in parts)
    var = sum((big / total) ** 2 * (k / n) * (1 - k / n) / n * (1 - n / big) for big, n, k in parts)
    return est - z * math.sqrt(var), est + z * math.sqrt(var)


@pytest.mark.parametrize(("p_review", "p_auto", "audit"), [(0.6, 0.9, 0.1), (0.55, 0.97, 0.1)])
def test_accuracy_and_precision_intervals_cover(p_review: float, p_auto: float, audit: float) -> None:
    """Seeded coverage of the 95% accuracy and precision intervals on review-loop windows.

    Each window: 150 review verdicts (70% labelled at random) and 250 auto-accepts audited at
    ``audit`` (about 25 labels, often all correct at p_auto 0.97: where plain stratified Wald
    collapses). Truth: the window's own accuracy / precision. Target >= 0.93; the assertion
    allows ~2.5 simulation sd (0.013 at 300 windows).
    """
    rng = np.random.default_rng(11)
    reps = 300
    hit_acc = hit_prec = hit_wald = counted = 0
    for _ in range(reps):
        z_r = (rng.uniform(size=150) < p_review).astype(float)
        z_a = (rng.uniform(size=250) < p_auto).astype(float)
        c_r, c_a = rng.uniform(0.5, 0.9, 150), rng.uniform(0.9, 1.0, 250)
        lab_r, lab_a = rng.uniform(size=150) < 0.7, rng.uniform(size=250) < audit
        if not lab_a.any():
            continue
        counted += 1
        strata = [_stratum("review", 150, c_r[lab_r], z_r[lab_r], SMALL),
                  _stratum("auto@0.1", 250, c_a[lab_a], z_a[lab_a], SMALL)]
        # the accuracy interval, without the bootstrap's cost
        acc = precision_estimate(strata, accumulator=SMALL)
        prec = precision_estimate(strata[1:], accumulator=SMALL)
        truth_acc = (z_r.sum() + z_a.sum()) / 400
        hit_acc += acc.lower - 1e-12 <= truth_acc <= acc.upper + 1e-12
        hit_prec += prec.lower - 1e-12 <= z_a.mean() <= prec.upper + 1e-12
        lo, hi = _wald([(150, int(lab_r.sum()), int(z_r[lab_r].sum())),
                        (250, int(lab_a.sum()), int(z_a[lab_a].sum()))])
        hit_wald += lo <= truth_acc <= hi
    rates = (hit_acc / counted, hit_prec / counted, hit_wald / counted)
    print(f"p_auto {p_auto}: accuracy coverage {rates[0]:.3f}, precision coverage {rates[1]:.3f} "
          f"(target >= 0.93); plain stratified Wald {rates[2]:.3f}; {counted} windows")
    assert rates[0] >= 0.93 - 0.03
    assert rates[1] >= 0.93 - 0.03


def test_population_estimates_accuracy_is_precision_estimate_over_the_same_strata() -> None:
    stream = _stream(4)
    strata = [_stratum(name, *v) for name, v in stream.items()]
    a, b = population_estimates(strata)["accuracy"], precision_estimate(strata)
    assert (a.estimate, a.lower, a.upper, a.labels) == (b.estimate, b.lower, b.upper, b.labels)


def test_ece_brier_th_intervals_cover_in_a_small_simulation() -> None:
    """Seeded coverage of the bootstrap intervals (printed; asserted loosely: no target is set)."""
    rng = np.random.default_rng(5)
    reps = 80
    hits = {"ece": 0, "brier": 0, "th_score": 0, "accuracy": 0}
    for i in range(reps):
        c = np.r_[rng.uniform(0.5, 0.9, 200), rng.uniform(0.9, 1.0, 200)]
        z = (rng.uniform(size=400) < c - 0.08).astype(float)
        lab = np.r_[rng.uniform(size=200) < 0.6, rng.uniform(size=200) < 0.25]
        review, auto = np.arange(200), np.arange(200, 400)
        strata = [_stratum("review", 200, c[review][lab[review]], z[review][lab[review]], SMALL),
                  _stratum("auto@0.25", 200, c[auto][lab[auto]], z[auto][lab[auto]], SMALL)]
        est = population_estimates(strata, accumulator=SMALL, seed=i)
        truth = summarize(c, z)
        for key in hits:
            hits[key] += est[key].lower - 1e-9 <= truth[key] <= est[key].upper + 1e-9
    rates = {k: v / reps for k, v in hits.items()}
    print("coverage (target 0.95):", {k: round(v, 3) for k, v in rates.items()})
    # 80 windows: sd ~0.025; accuracy's own coverage test is the one above
    assert rates["accuracy"] >= 0.87
    assert min(rates.values()) >= 0.78


def test_fields_stored_as_strings_read_the_same() -> None:
    """Redis hands counters back as strings: the estimates must not change."""
    stream = _stream(6)
    strata = [_stratum(name, *v) for name, v in stream.items()]
    as_text = [StratumData(s.name, s.population, {k: str(v) for k, v in s.fields.items()})
               for s in strata]
    assert population_estimates(as_text) == population_estimates(strata)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"n_bins": 7}, "must divide"), ({"eps": 0.2}, "not tracked"), ({"level": 1.0}, "level")],
)
def test_bad_options_are_refused(kwargs: dict, message: str) -> None:
    strata = [_stratum(name, *v) for name, v in _stream(7).items()]
    with pytest.raises(ValueError, match=message):
        population_estimates(strata, **kwargs)


def test_intervals_do_not_depend_on_how_many_labels_stand_behind_an_exact_stratum() -> None:
    """Doubling a fully labelled stratum's labels and population changes no estimate; the
    interval of a sampled stratum narrows as its labels grow (finite-population form)."""
    rng = np.random.default_rng(8)
    c = rng.uniform(0.6, 1.0, 400)
    z = (rng.uniform(size=400) < c).astype(float)
    few = precision_estimate([_stratum("auto@0.1", 400, c[:20], z[:20])])
    many = precision_estimate([_stratum("auto@0.1", 400, c[:200], z[:200])])
    all_ = precision_estimate([_stratum("auto@0.1", 400, c, z)])
    assert (few.upper - few.lower) > (many.upper - many.lower) > (all_.upper - all_.lower) == 0.0
    assert all_.estimate == pytest.approx(z.mean(), abs=1e-12)


@pytest.mark.parametrize("p", [0.5, 0.9, 0.99])
@pytest.mark.parametrize(("population", "audit"), [(30, 0.1), (400, 0.05)])
def test_precision_interval_covers_with_a_handful_of_audit_labels(
    p: float, population: int, audit: float
) -> None:
    """One auto stratum, 1.5 to 20 audit labels on average, precision from 0.5 to 0.99.

    Windows with no audit label are left out (NaN interval by contract). Target >= 0.93; the
    assertion allows ~2 simulation sd at 200 windows (0.015 at 0.95).
    """
    coarse = CalibrationAccumulator(fine_bins=10)
    rng = np.random.default_rng(13)
    hits = total = 0
    for _ in range(200):
        z = (rng.uniform(size=population) < p).astype(float)
        lab = rng.uniform(size=population) < audit
        if not lab.any():
            continue
        fields = coarse.increments_many(np.full(int(lab.sum()), 0.95), z[lab])
        iv = precision_estimate([StratumData("auto", population, fields)], accumulator=coarse)
        total += 1
        hits += iv.lower - 1e-12 <= z.mean() <= iv.upper + 1e-12
    print(f"N {population}, audit {audit}, p {p}: coverage {hits / total:.3f} (target >= 0.93) "
          f"over {total} windows")
    assert hits / total >= 0.93 - 0.03


def test_precision_over_many_audit_strata_is_not_pulled_to_the_middle() -> None:
    """Six auto-accept strata (one per audit rate in force: active audits' confidence bands,
    or a rate changed over time), about 25 audit labels each, every one at precision 0.9.

    The small-sample guard's pseudo-labels are split across the strata (the window gets z^2 of
    them, not each stratum): with z^2 per stratum, every stratum's mean was pulled 0.05 towards
    0.5 and the window's interval covered in about 0.3 of windows. Target >= 0.93; the
    assertion allows ~2.5 simulation sd at 300 windows."""
    rng = np.random.default_rng(5)
    rates = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
    hits = 0
    for _ in range(300):
        strata, right = [], 0.0
        for rate in rates:
            size = int(round(25 / rate))
            z = (rng.uniform(size=size) < 0.9).astype(float)
            lab = rng.uniform(size=size) < rate
            right += z.sum()
            strata.append(_stratum(f"auto@{rate}", size, np.full(int(lab.sum()), 0.95), z[lab], SMALL))
        truth = right / sum(s.population for s in strata)
        iv = precision_estimate(strata, accumulator=SMALL)
        hits += iv.lower - 1e-12 <= truth <= iv.upper + 1e-12
    print(f"six audit strata at precision 0.9: coverage {hits / 300:.3f} (target >= 0.93)")
    assert hits / 300 >= 0.93 - 0.04


def test_ece_interval_from_bins_by_hand() -> None:
    """Two bins, gaps 0.03 and -0.01 (plug-in ECE 0.04); two replicates of the gaps, (0.04, 0.01)
    and (0.02, -0.03): bin variances 1e-4 and 4e-4, so the debiased ECE is sqrt(9e-4 - 1e-4) +
    max(1e-4 - 4e-4, 0) -> 0 = 0.0282843 and the centre (0.04 + 0.0282843) / 2 = 0.0341421; the
    linearised ECE (signs +, -) replicates 0.03 and 0.05, sd 0.01, half-width 1.959964 x 0.01."""
    from judgefuse.calibration.stratified_bootstrap import ece_interval_from_bins

    gaps = np.array([0.03, -0.01])
    reps = np.array([[0.04, 0.01], [0.02, -0.03]])
    lo, hi = ece_interval_from_bins(gaps, reps, 0.95)
    assert lo == pytest.approx(0.0341421 - 0.0195996, abs=1e-6)
    assert hi == pytest.approx(0.0341421 + 0.0195996, abs=1e-6)
    # nothing left to predict: every replicate equals the point, and so does the interval
    assert ece_interval_from_bins(gaps, np.tile(gaps, (5, 1)), 0.95) == pytest.approx((0.04, 0.04))
    # a centre within its half-width of 0 is clipped there: gaps all noise
    lo, hi = ece_interval_from_bins(np.array([0.005, -0.005]), reps - [0.035, -0.015], 0.95)
    assert lo == 0.0 < hi


def test_ece_interval_covers_a_calibrated_window() -> None:
    """A calibrated judge (z ~ Bernoulli(c)): the window's ECE is near 0 and the plug-in from
    ~150 of 400 labels lies above it; the percentile interval of the bootstrap's replicates
    (the interval before) lay above the truth in about half the windows (coverage 0.53 here), the
    debiased-centre interval covers it in 0.98."""
    rng = np.random.default_rng(11)
    reps, hits = 100, 0
    for i in range(reps):
        c = np.r_[rng.uniform(0.5, 0.9, 200), rng.uniform(0.9, 1.0, 200)]
        z = (rng.uniform(size=400) < c).astype(float)
        lab = np.r_[rng.uniform(size=200) < 0.5, rng.uniform(size=200) < 0.25]
        review, auto = np.arange(200), np.arange(200, 400)
        strata = [_stratum("review", 200, c[review][lab[review]], z[review][lab[review]], SMALL),
                  _stratum("auto@0.25", 200, c[auto][lab[auto]], z[auto][lab[auto]], SMALL)]
        est = population_estimates(strata, accumulator=SMALL, seed=i)["ece"]
        truth = summarize(c, z)["ece"]
        hits += est.lower - 1e-9 <= truth <= est.upper + 1e-9
    print(f"ECE coverage of a calibrated window: {hits / reps:.3f} (target 0.95)")
    assert hits / reps >= 0.88
