"""``bootstrap_intervals_many``: every row's intervals from one shared stream of resamples equal
:func:`bootstrap_interval` row by row (the same resamples; only the width of a matrix product
differs, so the tolerance is 1e-9, far inside the endpoints' Monte Carlo error of about 0.085
standard deviations of the statistic at 1,000 resamples)."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration.bootstrap import bootstrap_interval, bootstrap_intervals_many

METRICS = ("accuracy", "ece", "brier", "mce", "th_score", "macroce", "auroc")


def _rows(sizes: tuple[int, ...], seed: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    rows = []
    for n in sizes:
        c = rng.uniform(0.5, 1.0, size=n).round(3)  # rounded: values on bin edges and ties too
        rows.append((c, rng.random(n) < c))
    return rows


@pytest.mark.parametrize("n_resamples", [1, 37, 1000])
def test_equals_one_interval_at_a_time(n_resamples: int) -> None:
    # rows of three lengths (shared draws are per length) and a length past one block of resamples
    rows = _rows((250, 400, 250, 12_000, 400))
    many = bootstrap_intervals_many(rows, METRICS, n_resamples=n_resamples, seed=7, n_bins=12, eps=0.15)
    for (c, z), got in zip(rows, many, strict=True):
        assert list(got) == list(METRICS)
        for metric in METRICS:
            want = bootstrap_interval(c, z, metric=metric, n_resamples=n_resamples, seed=7, n_bins=12, eps=0.15)
            have = got[metric]
            for field in ("estimate", "low", "high", "debiased"):
                assert getattr(have, field) == pytest.approx(getattr(want, field), abs=1e-9, nan_ok=True), (metric, field)
            assert (have.method, have.level, have.n_resamples) == (want.method, want.level, want.n_resamples)


def test_refuses_bad_counts() -> None:
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_intervals_many(_rows((10,)), ("accuracy",), n_resamples=0)


def test_rows_in_groups_draw_the_same_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the feature memory bound the rows are taken a few at a time, each group drawing the
    stream again: the intervals do not change."""
    from judgefuse.calibration import bootstrap

    rows = _rows((300, 300, 300, 300, 300))
    whole = bootstrap_intervals_many(rows, METRICS, n_resamples=200, seed=1)
    monkeypatch.setattr(bootstrap, "_FEATURE_BYTES", 300 * 25 * 8 * 2)  # two rows a group
    grouped = bootstrap_intervals_many(rows, METRICS, n_resamples=200, seed=1)
    assert [{m: i.as_dict() for m, i in r.items()} for r in grouped] == [
        {m: i.as_dict() for m, i in r.items()} for r in whole]


def test_products_over_several_blocks_equal_one_block_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """The resamples are drawn in the reference's blocks whatever the product size: intervals
    with products of one block and of many agree."""
    from judgefuse.calibration import bootstrap

    rows = _rows((4000, 4000))
    monkeypatch.setattr(bootstrap, "_CHUNK_CELLS", 4000 * 7)  # blocks of 7 resamples
    many_blocks = bootstrap_intervals_many(rows, METRICS, n_resamples=100, seed=4)
    monkeypatch.setattr(bootstrap, "_PRODUCT_CELLS", 1)  # one block per product
    one_block = bootstrap_intervals_many(rows, METRICS, n_resamples=100, seed=4)
    for got, want in zip(many_blocks, one_block, strict=True):
        for metric in METRICS:
            assert got[metric].as_dict() == pytest.approx(want[metric].as_dict(), abs=1e-9)
        for c, z in rows[:1]:
            assert got["ece"].low == pytest.approx(
                bootstrap_interval(c, z, metric="ece", n_resamples=100, seed=4).low, abs=1e-9)


@pytest.mark.parametrize("metrics", [("accuracy", "ece"), ("brier", "mce", "th_score", "macroce")])
def test_large_rows_drawn_over_cells_agree_within_monte_carlo_error(metrics: tuple[str, ...]) -> None:
    """Rows past LARGE_CELLS (resamples x items) are resampled over (bin, correct) cells: each
    endpoint within 5 standard errors of its Monte Carlo error (about 0.085 standard deviations of
    the statistic each at 1,000 resamples: the difference of two, 0.12) of the item-level draw's."""
    from judgefuse.calibration import bootstrap

    rng = np.random.default_rng(11)
    n = 30_000
    c = rng.uniform(0.5, 1.0, size=n).round(3)
    c[:40] = 0.05  # a cell of a few items: drawn item by item
    z = rng.random(n) < c
    cells = bootstrap_intervals_many([(c, z)], metrics, n_resamples=1000, seed=5)[0]
    assert n * 1000 > bootstrap.LARGE_CELLS
    items = {metric: bootstrap_interval(c, z, metric=metric, n_resamples=1000, seed=5) for metric in metrics}
    for metric in metrics:
        got, want = cells[metric], items[metric]
        sd = (want.high - want.low) / (2 * 1.96)
        assert got.estimate == want.estimate
        assert got.low <= got.estimate <= got.high
        for field in ("low", "high", "debiased"):
            assert abs(getattr(got, field) - getattr(want, field)) <= 5 * 0.12 * sd, (metric, field)
    again = bootstrap_intervals_many([(c, z)], metrics, n_resamples=1000, seed=5)[0]
    assert again == cells  # seeded


@pytest.mark.parametrize("large_cells", [10**9, 1_000])  # items drawn shared; each row over its cells
def test_rows_given_in_parts_at_their_positions_get_the_intervals_they_get_together(
    monkeypatch: pytest.MonkeyPatch, large_cells: int
) -> None:
    """``positions``: a report's rows given in two calls, out of order, each at its place in the
    report, get the intervals of one call; a large row's are seeded by its place, so the wrong
    place draws other resamples."""
    from judgefuse.calibration import bootstrap

    monkeypatch.setattr(bootstrap, "LARGE_CELLS", large_cells)
    rows = _rows((300, 300, 300, 300))
    whole = bootstrap_intervals_many(rows, METRICS, n_resamples=200, seed=2)
    first = bootstrap_intervals_many([rows[3], rows[1]], METRICS, n_resamples=200, seed=2, positions=[3, 1])
    second = bootstrap_intervals_many([rows[0], rows[2]], METRICS, n_resamples=200, seed=2, positions=(0, 2))
    parts = [second[0], first[1], second[1], first[0]]
    assert [{m: i.as_dict() for m, i in r.items()} for r in parts] == [
        {m: i.as_dict() for m, i in r.items()} for r in whole]
    misplaced = bootstrap_intervals_many([rows[3]], METRICS, n_resamples=200, seed=2, positions=[0])
    assert (misplaced[0]["ece"].as_dict() == whole[3]["ece"].as_dict()) == (large_cells > 10**6)
    with pytest.raises(ValueError, match="2 positions for 1 rows"):
        bootstrap_intervals_many([rows[0]], METRICS, n_resamples=200, positions=[0, 1])
