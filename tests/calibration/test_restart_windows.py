"""The restart engine's fast paths give exactly what the definitions say.

``RestartedMean.update`` brings a level's sums up to date only when it rolls, ``windows``
inlines ``window_starts``, and ``outside`` is the drift detectors' two-sided prefilter with a
count of updates that cannot pass it; here each is checked against the definitions
(``window_starts``, the stream's own sums, a plain ``keep``, the next updates' answers) on
random streams, for every window, at every step.
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
            kept, _ = engine.outside(low, high, need)
            plain = engine.windows(lambda s, n, lo=low, hi=high, k=need: lo * n - s >= k or s - hi * n >= k)
            for a, b in zip(kept, plain, strict=True):
                assert np.array_equal(a, b)
    assert engine.outside(0.0, 1.0, 1e9)[0].sums.size == 0  # nothing kept: empty arrays


def _passes(engine: RestartedMean, low: float, high: float, need: float) -> bool:
    return engine.windows(lambda s, n: low * n - s >= need or s - high * n >= need).sums.size > 0


@pytest.mark.parametrize("push", ["random", "zeros", "ones"])
def test_quiet_updates_cannot_pass_the_prefilter(push: str) -> None:
    """After ``outside`` says ``quiet`` = q, the next q updates keep nothing, whatever they add:
    checked on random streams and on the worst cases (all 0, driving windows below ``low`` as
    fast as possible; all 1, above ``high``), where the bound must also be tight enough to use."""
    rng = random.Random({"random": 1, "zeros": 2, "ones": 3}[push])
    low, high, need = 0.4, 0.6, 4.87
    engine = RestartedMean(min_level=2, squares=True)
    pending: list[int] = []  # steps promised quiet
    quiet_total, promise_end, slack = 0, -1, []
    for step in range(4000):
        phase = (step // 150) % 2  # stretches of a steady stream, then a stretch of the push
        x = rng.random() if phase == 0 or push == "random" else (0.0 if push == "zeros" else 1.0)
        engine.update(x)
        if pending and pending[0] == step:
            pending.pop(0)
            assert not _passes(engine, low, high, need), step
            continue
        kept, quiet = engine.outside(low, high, need)
        assert (kept.sums.size > 0) == _passes(engine, low, high, need)
        assert quiet == 0 or kept.sums.size == 0
        if kept.sums.size > 0 and promise_end >= 0:
            slack.append(step - promise_end)  # the first pass after a promise: how late it came
            promise_end = -1
        pending = list(range(step + 1, step + 1 + quiet))
        quiet_total += quiet
        if quiet:
            promise_end = step + quiet
    if push == "random":
        assert quiet_total > 4000 // 3  # the count is worth having: most scans are skipped
    else:  # at the fastest drift a window passes within two updates of the promise's end
        assert slack and min(slack) <= 2
