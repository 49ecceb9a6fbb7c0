"""CalibrationAccumulator: field increments, exact undo, exact metrics against summarize."""

from __future__ import annotations

import math
import sqlite3

import numpy as np
import pytest

from judgefuse.calibration import reliability_diagram, summarize
from judgefuse.calibration.accumulator import CalibrationAccumulator
from judgefuse.calibration.binning import equal_width_bin_index

ACC = CalibrationAccumulator()
EXACT = ("n", "accuracy", "ece", "mce", "brier", "nll", "ice", "th_score", "macroce")
APPROX = ("adaptive_ce", "auroc", "aurc")


def _edge_values() -> np.ndarray:
    """Every edge of 10, 100 and 1000 bins (as the literal i/n), their neighbours, 0 and 1."""
    edges = np.unique(np.r_[np.arange(1001) / 1000, np.arange(101) / 100, np.arange(11) / 10])
    nudged = np.r_[np.nextafter(edges, 0.0), np.nextafter(edges, 1.0)]
    # literals a user writes: 0.1, 0.3, 0.7, 0.15 ... (the same floats as i/n)
    literals = np.array([0.1, 0.2, 0.3, 0.6, 0.7, 0.9, 0.05, 0.15, 0.85, 0.95, 0.001, 0.999])
    return np.unique(np.clip(np.r_[edges, nudged, literals], 0.0, 1.0))


def _data(kind: str, n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    if kind == "grid":  # judge-like: coarse, many ties, edges
        c = np.round(rng.beta(5, 1.2, n), 2)
    elif kind == "fine-grid":
        c = np.round(rng.uniform(0.0, 1.0, n), 3)
    elif kind == "continuous":
        c = rng.uniform(0.0, 1.0, n)
    else:  # "edges"
        e = _edge_values()
        c = np.r_[e, rng.choice(e, max(n - e.size, 0))]
    z = (rng.uniform(size=c.size) < c).astype(int)
    return c, z


# ---------------------------------------------------------------- binning
def test_fine_bins_nest_exactly_into_coarse_bins_on_edges() -> None:
    c = _edge_values()
    fine = equal_width_bin_index(c, 1000)
    for n_bins in (1, 2, 4, 5, 8, 10, 20, 25, 40, 50, 100, 125, 200, 250, 500, 1000):
        assert np.array_equal(equal_width_bin_index(c, n_bins), fine // (1000 // n_bins)), n_bins
    assert fine[c == 1.0].tolist() == [999] and fine[c == 0.0].tolist() == [0]
    assert equal_width_bin_index(np.array([0.1, 0.9]), 10).tolist() == [1, 9]


# ---------------------------------------------------------------- exactness
@pytest.mark.parametrize("kind", ["grid", "fine-grid", "continuous", "edges"])
@pytest.mark.parametrize(("n_bins", "eps"), [(10, 0.1), (100, 0.05), (20, 0.15), (1000, 0.1)])
def test_exact_metrics_equal_summarize(kind: str, n_bins: int, eps: float) -> None:
    c, z = _data(kind)
    got = ACC.metrics_from_fields(ACC.increments_many(c, z), n_bins=n_bins, eps=eps)
    want = summarize(c, z, n_bins=n_bins, eps=eps)
    assert set(got) == set(want) | {"reliability"}
    for key in EXACT:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key
    if kind in ("grid", "fine-grid"):  # one distinct value per fine bin: approximations exact
        for key in APPROX:
            assert got[key] == pytest.approx(want[key], abs=1e-9), key


def test_approximations_are_close_on_continuous_confidences() -> None:
    c, z = _data("continuous", n=20_000, seed=3)
    got, want = ACC.metrics_from_fields(ACC.increments_many(c, z)), summarize(c, z)
    assert got["auroc"] == pytest.approx(want["auroc"], abs=1e-3)
    assert got["aurc"] == pytest.approx(want["aurc"], abs=1e-3)
    assert got["adaptive_ce"] == pytest.approx(want["adaptive_ce"], abs=1e-2)


def test_reliability_matches_reliability_diagram() -> None:
    c, z = _data("edges")
    for n_bins in (10, 100):
        got = ACC.metrics_from_fields(ACC.increments_many(c, z), n_bins=n_bins)["reliability"]
        want = reliability_diagram(c, z, n_bins=n_bins)
        assert len(got) == n_bins
        for g, w in zip(got, want, strict=True):
            assert (g.index, g.lower, g.upper, g.count) == (w.index, w.lower, w.upper, w.count)
            if w.count:
                assert g.accuracy == w.accuracy
                assert g.mean_confidence == pytest.approx(w.mean_confidence, abs=1e-9)
            else:
                assert math.isnan(g.accuracy) and math.isnan(g.mean_confidence)


def test_one_class_only() -> None:
    c = np.array([0.2, 0.95, 1.0, 0.5])
    for z in (np.ones(4), np.zeros(4)):
        got, want = ACC.metrics_from_fields(ACC.increments_many(c, z)), summarize(c, z)
        assert math.isnan(got["auroc"]) and math.isnan(want["auroc"])
        for key in EXACT + ("adaptive_ce", "aurc"):
            assert got[key] == pytest.approx(want[key], abs=1e-9), key


# ---------------------------------------------------------------- increments
def test_single_increments_sum_to_batch_increments() -> None:
    c, z = _data("edges", n=800)
    one_by_one = ACC.add_fields(*(ACC.increments(ci, zi) for ci, zi in zip(c, z, strict=True)))
    assert one_by_one == ACC.increments_many(c, z)
    assert all(isinstance(v, int) for v in one_by_one.values())
    assert set(one_by_one) <= ACC.field_names


def test_one_increment_is_small_and_named() -> None:
    inc = ACC.increments(0.95, True)
    assert inc["n950"] == 1 and inc["k950"] == 1 and inc["c950"] == round(0.95 * 2**32)
    assert inc["th050hn"] == inc["th050hk"] == 1 and inc["th100hn"] == 1 and "th100ln" not in inc
    assert len(inc) <= 16
    wrong = ACC.increments(0.0, False)
    assert wrong["n0"] == 1 and "k0" not in wrong and "c0" not in wrong
    assert wrong["th050ln"] == 1 and "th050lk" not in wrong
    assert ACC.increments(0.95, True, sign=-1) == {k: -v for k, v in inc.items()}


def _apply(fields: dict[str, int], inc: dict[str, int]) -> None:
    """An in-memory backend: add each delta, drop fields that return to 0."""
    for key, value in inc.items():
        total = fields.get(key, 0) + value
        if total:
            fields[key] = total
        else:
            fields.pop(key, None)


def test_sign_minus_one_undoes_exactly_and_relabels() -> None:
    c, z = _data("continuous", n=2000, seed=5)
    rng = np.random.default_rng(6)
    fields = ACC.increments_many(c, z)
    # relabel 300 items one at a time: subtract the old increment, add the new one
    z_new = z.copy()
    for i in rng.choice(c.size, 300, replace=False):
        _apply(fields, ACC.increments(c[i], z_new[i], sign=-1))
        z_new[i] = 1 - z_new[i]
        _apply(fields, ACC.increments(c[i], z_new[i]))
    assert fields == ACC.increments_many(c, z_new)  # bit-for-bit, not approximately
    # removing everything leaves nothing
    for ci, zi in zip(c, z_new, strict=True):
        _apply(fields, ACC.increments(ci, zi, sign=-1))
    assert fields == {}
    empty = ACC.metrics_from_fields(fields)
    assert empty["n"] == 0.0 and all(math.isnan(empty[k]) for k in EXACT if k != "n")
    assert [b.count for b in empty["reliability"]] == [0] * 10


def test_sqlite_backend_applies_increments_blindly() -> None:
    """A storage layer only adds integers; it never needs to understand the fields."""
    c, z = _data("grid", n=500, seed=7)
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE f (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")

    def apply(inc: dict[str, int]) -> None:
        with db:
            db.executemany(
                "INSERT INTO f (k, v) VALUES (?, ?) ON CONFLICT(k) DO UPDATE SET v = v + excluded.v",
                inc.items(),
            )

    for ci, zi in zip(c, z, strict=True):
        apply(ACC.increments(ci, zi))
    apply(ACC.increments(c[0], z[0], sign=-1))  # relabel item 0
    apply(ACC.increments(c[0], 1 - z[0]))
    z2 = z.copy()
    z2[0] = 1 - z2[0]
    stored = {k: v for k, v in db.execute("SELECT k, v FROM f") if v}
    assert stored == ACC.increments_many(c, z2)
    # Redis hands back strings: accepted as well
    got = ACC.metrics_from_fields({k: str(v) for k, v in stored.items()})
    want = summarize(c, z2)
    for key in EXACT + APPROX:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key


def test_time_buckets_sum_to_the_whole() -> None:
    c, z = _data("continuous", n=1200, seed=8)
    buckets = [ACC.increments_many(c[i : i + 100], z[i : i + 100]) for i in range(0, 1200, 100)]
    assert ACC.add_fields(*buckets) == ACC.increments_many(c, z)
    last_3 = ACC.metrics_from_fields(ACC.add_fields(*buckets[-3:]))
    assert last_3["ece"] == pytest.approx(summarize(c[900:], z[900:])["ece"], abs=1e-9)


# ---------------------------------------------------------------- configuration and errors
def test_other_configurations() -> None:
    acc = CalibrationAccumulator(fine_bins=100, th_eps=(0.2,))
    c, z = _data("edges", n=1000, seed=9)
    got = acc.metrics_from_fields(acc.increments_many(c, z), n_bins=10, eps=0.2)
    want = summarize(c, z, n_bins=10, eps=0.2)
    for key in EXACT:
        assert got[key] == pytest.approx(want[key], abs=1e-9), key
    assert "fine_bins=100" in repr(acc)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: ACC.increments(1.5, True), "confidence"),
        (lambda: ACC.increments(float("nan"), True), "NaN"),
        (lambda: ACC.increments(0.5, 2), "correct"),
        (lambda: ACC.increments(0.5, True, sign=2), "sign"),
        (lambda: ACC.increments(0.5, True, sign=True), "sign"),
        (lambda: ACC.metrics_from_fields({"n1": 1}, n_bins=3), "divide"),
        (lambda: ACC.metrics_from_fields({"n1": 1}, eps=0.2), "not tracked"),
        (lambda: ACC.metrics_from_fields({"bogus": 1}), "unknown"),
        (lambda: ACC.metrics_from_fields({"n1": -1}), "inconsistent"),
        (lambda: ACC.metrics_from_fields({"n1": 1, "k1": 2}), "inconsistent"),
        (lambda: CalibrationAccumulator(th_eps=(0.6,)), "th_eps"),
        (lambda: CalibrationAccumulator(th_eps=(0.1234,)), "th_eps"),
        (lambda: CalibrationAccumulator(th_eps=(0.1, 0.1)), "duplicate"),
        (lambda: CalibrationAccumulator(fine_bins=0), "n_bins"),
    ],
)
def test_errors(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()
