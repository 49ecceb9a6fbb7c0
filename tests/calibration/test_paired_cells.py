"""``compare``'s intervals past LARGE_CELLS (resamples x items), drawn over cells
(judgefuse.calibration.paired_cells), against the item-level bootstrap: each endpoint within 5
standard errors of the Monte Carlo error of the difference of two 1,000-resample endpoints (about
0.085 standard deviations of the statistic each: 0.12), as tests/calibration/test_bootstrap_many.py
tests ``eval``'s large rows; estimates equal; undefined views undefined alike; seeded."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.calibration import comparison
from judgefuse.calibration.bootstrap import LARGE_CELLS, BootstrapInterval, interval_from_stats
from judgefuse.calibration.comparison import compare_judges_with_intervals
from judgefuse.calibration.paired_cells import mean_difference_cell_stats
from judgefuse.evaluation import candidate_aligned
from judgefuse.evaluation.candidate_aligned import CandidateScores, candidate_differences, preference_row

N = 24_000
TOLERANCE = 5 * 0.12
"""Endpoints apart, in standard deviations of the statistic (the item-level interval's width / 3.92)."""


def assert_within_monte_carlo_error(got: BootstrapInterval, want: BootstrapInterval, what: object) -> None:
    assert got.estimate == want.estimate, what
    assert got.low <= got.estimate <= got.high, what
    sd = (want.high - want.low) / (2 * 1.96)
    for field in ("low", "high"):
        assert abs(getattr(got, field) - getattr(want, field)) <= TOLERANCE * sd, (what, field)


def two_judges(seed: int) -> tuple[np.ndarray, ...]:
    """Judges of accuracy 0.70 and 0.66 with confidences in [0.5, 1]; the second leaves 500 items
    unanswered (0.5, wrong) and has a cell of a few items (drawn item by item)."""
    rng = np.random.default_rng(seed)
    c1, z1 = rng.uniform(0.5, 1.0, N).round(3), rng.random(N) < 0.70
    c2, z2 = rng.uniform(0.5, 1.0, N).round(4), rng.random(N) < 0.66
    c2[:500], z2[:500] = 0.5, False
    c2[500:530], z2[500:530] = 0.05, True
    return c1, z1, c2, z2


def test_comparison_views_agree_within_monte_carlo_error(monkeypatch: pytest.MonkeyPatch) -> None:
    c1, z1, c2, z2 = two_judges(3)
    assert N * 1000 > LARGE_CELLS
    cells = compare_judges_with_intervals(c1, z1, c2, z2, seed=5)
    assert compare_judges_with_intervals(c1, z1, c2, z2, seed=5) == cells  # seeded
    monkeypatch.setattr(comparison, "LARGE_CELLS", 10**12)
    items = compare_judges_with_intervals(c1, z1, c2, z2, seed=5)
    assert cells.comparison == items.comparison
    for key, want in items.differences.items():
        assert_within_monte_carlo_error(cells.differences[key].interval, want.interval, key)
        assert cells.differences[key].flips == want.flips


@pytest.mark.parametrize("case", ["judge 1 always right", "never the same outcome"])
def test_undefined_views_are_undefined_alike(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = 5000
    rng = np.random.default_rng(1)
    c1, c2 = rng.uniform(0.5, 1.0, n), rng.uniform(0.5, 1.0, n)
    z2 = rng.random(n) < 0.6
    z1 = np.ones(n, dtype=bool) if case == "judge 1 always right" else ~z2
    monkeypatch.setattr(comparison, "LARGE_CELLS", 0)
    cells = compare_judges_with_intervals(c1, z1, c2, z2, n_resamples=1000, seed=2)
    monkeypatch.setattr(comparison, "LARGE_CELLS", 10**12)
    items = compare_judges_with_intervals(c1, z1, c2, z2, n_resamples=1000, seed=2)
    for key, want in items.differences.items():
        got = cells.differences[key].interval
        assert math.isnan(got.low) == math.isnan(want.interval.low), key
        if not math.isnan(got.low):
            assert_within_monte_carlo_error(got, want.interval, key)


def test_candidate_view_agrees_within_monte_carlo_error(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(4)
    label_a = rng.random(N) < 0.5
    p_1 = np.where(label_a, rng.uniform(0.3, 1.0, N), rng.uniform(0.0, 0.7, N)).round(3)
    p_2 = np.where(label_a, rng.uniform(0.2, 1.0, N), rng.uniform(0.0, 0.8, N)).round(4)
    p_2[:300] = 0.5  # no answer
    index = np.arange(N)
    first, second = CandidateScores(p_1, label_a, index), CandidateScores(p_2, label_a, index)
    cells = candidate_differences(first, second, raw_winners={"ece": 1, "brier": 2}, seed=5)
    monkeypatch.setattr(candidate_aligned, "LARGE_CELLS", 10**12)
    items = candidate_differences(first, second, raw_winners={"ece": 1, "brier": 2}, seed=5)
    for key, want in items.items():
        assert_within_monte_carlo_error(cells[key].interval, want.interval, key)
        assert (cells[key].score_1, cells[key].score_2, cells[key].flips) == (want.score_1, want.score_2, want.flips)


def test_self_preference_excess_agrees_within_monte_carlo_error(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    own_is_a, label_a = rng.random(N) < 0.5, rng.random(N) < 0.5
    answered = rng.random(N) < 0.97
    chose_a = np.where(rng.random(N) < 0.56, own_is_a, ~own_is_a)

    def row() -> BootstrapInterval:
        found = preference_row("gpt-x", "openai", own_is_a, answered, chose_a, label_a, n_resamples=1000, level=0.95,
                               seed=5)  # fmt: skip
        return BootstrapInterval(found.excess, found.low, found.high, math.nan, "", 0.95, 1000)

    cells = row()
    chose_own = (chose_a == own_is_a)[answered].astype(float)
    label_own = (label_a == own_is_a)[answered].astype(float)
    stats = mean_difference_cell_stats(chose_own, label_own, n_resamples=1000, seed=5)
    drawn = interval_from_stats(cells.estimate, stats, bounds=(-1.0, 1.0), n_resamples=1000)
    assert (cells.low, cells.high) == (drawn.low, drawn.high)  # the four cells' draw
    monkeypatch.setattr(candidate_aligned, "LARGE_CELLS", 10**12)
    assert_within_monte_carlo_error(cells, row(), "excess")


def test_too_many_cells_in_use_resample_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_CELL_DRAWS (resamples x cells in use: e.g. ``--bins 1000`` on continuous
    confidences) the cells would hold a few items each: items are resampled, to the bit."""
    from judgefuse.calibration import paired_cells

    c1, z1, c2, z2 = (values[:3000] for values in two_judges(7))
    index = np.arange(3000)
    first, second = CandidateScores(c1, z1, index), CandidateScores(c2, z1, index)

    def both() -> tuple[object, object]:
        return (
            compare_judges_with_intervals(c1, z1, c2, z2, n_resamples=200, seed=1),
            candidate_differences(first, second, raw_winners={}, n_resamples=200, seed=1),
        )

    items = both()
    for module in (comparison, candidate_aligned):
        monkeypatch.setattr(module, "LARGE_CELLS", 0)
    assert both() != items  # drawn over cells
    monkeypatch.setattr(paired_cells, "MAX_CELL_DRAWS", 200 * 10)
    assert both() == items
