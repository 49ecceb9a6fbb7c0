"""The restart engine's fast paths give exactly what the definitions say.

``RestartedMean.update`` counts the live windows of a level without building them, and
``windows`` inlines ``window_starts`` and (with ``outside=``) the drift detectors' two-sided
prefilter; here both are checked against the definitions (``window_starts``, a plain ``keep``)
on random streams, for every window, at every step.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from judgefuse.calibration.restarts import SLOTS, RestartedMean, window_starts


def _reference_windows(engine: RestartedMean) -> list[tuple[int, int, float, float | None]]:
    """(level, start, sum, sum of squares) of every live window, from ``window_starts``."""
    out = []
    for j, row in enumerate(engine.sums):
        level = engine.min_level + j
        for slot, start in enumerate(window_starts(engine.t, level)):
            if start >= 0:
                out.append((level, start, row[slot], row[SLOTS + slot] if engine.squares else None))
    return out


@pytest.mark.parametrize("min_level", [0, 2, 6])
@pytest.mark.parametrize("squares", [False, True])
def test_windows_and_sums_match_the_definitions(min_level: int, squares: bool) -> None:
    rng = random.Random(min_level * 2 + squares)
    engine = RestartedMean(min_level=min_level, squares=squares)
    xs: list[float] = []
    for step in range(1500):
        x = rng.random() if step < 800 else 0.3 * rng.random()  # a drop half-way
        engine.update(x)
        xs.append(x)
        expected = _reference_windows(engine)
        w = engine.windows()
        assert list(zip(w.levels.tolist(), w.starts.tolist(), strict=True)) == [e[:2] for e in expected]
        # each window's sum is the sum of the stream since its start (to rounding)
        for level, start, total, _sq in expected:
            assert total == pytest.approx(sum(xs[start:]), abs=1e-9), (level, start)
        assert np.array_equal(w.counts, engine.t - w.starts)
        if squares:
            assert w.squares is not None and w.squares.tolist() == [e[3] for e in expected]
        else:
            assert w.squares is None


def test_outside_is_the_two_sided_keep() -> None:
    rng = random.Random(7)
    engine = RestartedMean(min_level=2, squares=True)
    for step in range(3000):
        engine.update(rng.random() if step < 1500 else 0.25 * rng.random())
        for low, high, need in ((0.4, 0.6, 1.0), (0.45, 0.55, 3.0), (0.2, 0.9, 0.5)):
            kept = engine.windows(outside=(low, high, need))
            plain = engine.windows(lambda s, n, lo=low, hi=high, k=need: lo * n - s >= k or s - hi * n >= k)
            for a, b in zip(kept, plain, strict=True):
                assert np.array_equal(a, b)
    assert engine.windows(outside=(0.0, 1.0, 1e9)).sums.size == 0  # nothing kept: empty arrays
