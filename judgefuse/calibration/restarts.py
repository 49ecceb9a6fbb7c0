"""Restart candidates on a dyadic grid, and how the error budget is spread over them.

Why restarts: one confidence sequence over everything since tuning averages a late drop with
the good past, so it reacts slowly (a drop from 0.90 to 0.70 after 200-1,000 good labels took a
median ~970 labels and was missed half the time within 2,000). Here every *candidate* is a
confidence sequence over the labels since its own start, and an alarm fires when any candidate
excludes the target: the candidate that started just after the change sees only bad labels.

**The grid.** Level ``k`` (``k >= min_level``) starts a candidate every ``2^k`` labels: starts
``s = i * 2^k`` (``i = 0, 1, 2, ...``). After ``t`` labels each level keeps only its
:data:`SLOTS` most recent starts, ``cur = floor(t / 2^k) * 2^k``, ``cur - 2^k``, ... (those
>= 0), so a start lives for ``SLOTS * 2^k`` labels; levels run from ``min_level`` up to the first
one whose ``cur`` start is 0 (``max(min_level, bit_length(t))``). So a change is followed, at
every scale ``2^k``, by a candidate that starts at most ``2^k`` labels after it and lives for
``(SLOTS - 1) * 2^k`` to ``SLOTS * 2^k`` labels: the level near the needed evidence catches it.
That is ``O(log t)`` candidates, updated in ``O(log t)`` per label, stored as ``SLOTS`` sums per
level. Why four slots and not two: a start's budget does not depend on how long it is kept, so
keeping it longer is free power; on drops 0.90 -> 0.75 (target 0.85) two slots gave a median
delay of 350 labels, three 337, four 332 (and the p90 fell from 599 to 559).

**The budget.** Candidate (level ``k``, index ``i``) gets ``alpha_(k,i) = alpha * w_j * v_i``
with ``j = k - min_level`` and ``w_j = 1 / ((j+1)(j+2))``, ``v_i = 1 / ((i+1)(i+2))``: both sum
to exactly 1 (telescoping), so the budgets of all candidates that could ever exist sum to
``alpha``. Each candidate's test is a nonnegative supermartingale from its (label-independent)
start, so by Ville and the union bound the chance that *any* candidate *ever* wrongly rejects is
at most ``alpha``, however long the stream and however often it is read. Dropping old candidates
only loses power, never validity. The price of an unbounded stream is a threshold
``log(1/alpha_(k,i))`` that grows like ``2 log i`` for late starts: detection delay grows with
the log of how late the change comes, which is unavoidable when false alarms are bounded over
an infinite horizon (a CUSUM-style detector bounds the false-alarm *rate* instead, and fires on
every long enough drift-free stream).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "DEFAULT_MIN_LEVEL",
    "SLOTS",
    "RestartedMean",
    "Windows",
    "check_min_level",
    "level_count",
    "log_threshold",
    "window_starts",
]

#: Shortest restart spacing 2^6 = 64 labels. Shorter windows can only flag bursts of errors
#: and take budget from the scales a 10-point drop needs (a few hundred labels): on drops
#: 0.90 -> 0.75 (target 0.85) the median delay was 396 labels with min_level 3, 376 with 4,
#: 355 with 5 (two slots) and 332 -> 302 going from 5 to 6 (four slots). A collapse to
#: precision 0.3 is still caught within ~35 labels (tests/calibration/test_sequential.py).
DEFAULT_MIN_LEVEL = 6

#: Windows kept per level (the most recent starts); see "The grid" above.
SLOTS = 4


def check_min_level(min_level: Any) -> int:
    if isinstance(min_level, bool) or not isinstance(min_level, (int, np.integer)) or not (
        0 <= min_level <= 40
    ):
        raise ValueError(f"min_level must be an integer in [0, 40], got {min_level!r}")
    return int(min_level)


def level_count(t: int, min_level: int) -> int:
    """Number of levels in use after ``t`` labels: ``min_level .. max(min_level, bit_length(t))``."""
    return max(min_level, int(t).bit_length()) - min_level + 1


def window_starts(t: Any, level: int) -> tuple[Any, ...]:
    """The :data:`SLOTS` live starts of level ``level`` after ``t`` labels, newest first.

    ``t`` is an int or an int array; a start that does not exist yet is -1. A window covers
    labels ``start+1 .. t``.
    """
    cur = (t >> level) << level
    out = [cur]
    for slot in range(1, SLOTS):
        start = cur - slot * (1 << level)
        if isinstance(start, np.ndarray):
            out.append(np.where(start >= 0, start, -1))
        else:
            out.append(start if start >= 0 else -1)
    return tuple(out)


def log_threshold(alpha: float, level: Any, start: Any, min_level: int) -> Any:
    """``log(1 / alpha_(k,i))`` for the candidate of level ``k`` starting at label ``start``."""
    j = np.asarray(level) - min_level
    i = np.asarray(start) >> np.asarray(level)
    out = (-math.log(alpha) + np.log((j + 1.0) * (j + 2.0)) + np.log((i + 1.0) * (i + 2.0)))
    return float(out) if np.ndim(out) == 0 else out


class Windows(NamedTuple):
    """The live candidate windows after ``t`` observations, one entry per window.

    ``squares`` is None unless the engine tracks sums of squares. Empty windows are included.
    """

    levels: np.ndarray
    starts: np.ndarray
    sums: np.ndarray
    squares: np.ndarray | None
    counts: np.ndarray


def _empty_windows(squares: bool) -> Windows:
    empty_int, empty_float = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    for array in (empty_int, empty_float):
        array.flags.writeable = False  # shared by every empty answer
    return Windows(empty_int, empty_int, empty_float, empty_float if squares else None, empty_int)


_EMPTY = _empty_windows(False)
_EMPTY_SQUARES = _empty_windows(True)


class RestartedMean:
    """Running sums of the restart windows of one [0, 1] stream; ``O(log t)`` per update.

    Keeps the count ``t``, the total, and per level the sums of its :data:`SLOTS` windows,
    newest first (with ``squares=True`` also their sums of squares, which variance-adaptive
    tests need). The shared engine of the precision monitor and the drift detectors.

    The sums are one ``(levels, SLOTS)`` array (and one of squares), so an update adds ``x`` to
    every live window in one numpy call instead of ~40 additions in Python: the drift detectors
    run two updates per vote on the request path. Each window still gets ``x`` added one
    observation at a time, as a Python loop would, so the sums are the same float for float
    (a monitor's stored state, folded label by label, equals a rebuild's).
    """

    def __init__(self, *, min_level: int = DEFAULT_MIN_LEVEL, squares: bool = False) -> None:
        self.min_level = check_min_level(min_level)
        self.squares = bool(squares)
        self.t = 0
        self.total = 0.0
        self.total_sq = 0.0
        # per level: SLOTS window sums, newest first; which of them exist (start >= 0)
        self._sums = np.zeros((1, SLOTS))
        self._squares = np.zeros((1, SLOTS))
        self._live = np.zeros((1, SLOTS), dtype=bool)
        self._live[0, 0] = True

    @property
    def width(self) -> int:
        return 2 * SLOTS if self.squares else SLOTS

    @property
    def sums(self) -> list[list[float]]:
        """Per level, the :data:`SLOTS` window sums, newest first (then as many sums of squares
        with ``squares``); a window that does not exist yet reads 0."""
        if self.squares:
            return np.hstack([self._sums, self._squares]).tolist()
        return self._sums.tolist()

    def update(self, x: float) -> None:
        """Add one observation in [0, 1]."""
        t = self.t + 1
        if t & (t - 1) == 0 and len(self._sums) < level_count(t, self.min_level):
            # t is a power of two: a new top level, its current window starts at 0
            self._add_level()
        np.add(self._sums, x, out=self._sums, where=self._live)
        x2 = x * x
        if self.squares:
            np.add(self._squares, x2, out=self._squares, where=self._live)
        self.total += x
        self.total_sq += x2
        self.t = t
        if t & ((1 << self.min_level) - 1) == 0:
            self._roll(t)

    def _add_level(self) -> None:
        """A new top level whose current window starts at 0 (it holds everything so far)."""
        row = np.zeros((1, SLOTS))
        row[0, 0] = self.total
        self._sums = np.vstack([self._sums, row])
        row = np.zeros((1, SLOTS))
        row[0, 0] = self.total_sq
        self._squares = np.vstack([self._squares, row])
        live = np.zeros((1, SLOTS), dtype=bool)
        live[0, 0] = True
        self._live = np.vstack([self._live, live])

    def _roll(self, t: int) -> None:
        """Every level whose spacing divides ``t``: its windows move one slot back, a new one
        starts (empty); the levels at one spacing's multiple are the lowest ones."""
        rolled = 0
        while rolled < len(self._sums) and t & ((1 << (self.min_level + rolled)) - 1) == 0:
            rolled += 1
        for block in (self._sums, self._squares, self._live):
            block[:rolled, 1:] = block[:rolled, :-1].copy()
        self._sums[:rolled, 0] = 0.0
        self._squares[:rolled, 0] = 0.0
        self._live[:rolled, 0] = True

    def windows(self, keep: Callable[[float, int], bool] | None = None) -> Windows:
        """The live windows, optionally only those with ``keep(sum, count)`` true.

        ``keep`` runs in plain Python before any array is built: monitors pass "the window
        mean is past the tested value", which skips the numpy work on most updates.
        """
        levels, starts, sums, squares = [], [], [], []
        t = self.t
        square_rows = self._squares.tolist() if self.squares else None
        for j, row in enumerate(self._sums.tolist()):
            level = self.min_level + j
            step = 1 << level
            cur = (t >> level) << level  # window_starts(t, level) for an int t, inlined:
            for slot in range(min(SLOTS, (t >> level) + 1)):  # the starts >= 0, newest first
                start = cur - slot * step
                if keep is not None and not keep(row[slot], t - start):
                    continue
                levels.append(level)
                starts.append(start)
                sums.append(row[slot])
                if square_rows is not None:
                    squares.append(square_rows[j][slot])
        return self._as_windows(levels, starts, sums, squares)

    def outside(self, low: float, high: float, need: float) -> tuple[Windows, int]:
        """The drift detectors' two-sided prefilter: the live windows with ``low * count - sum
        >= need`` or ``sum - high * count >= need`` (tested inline: a call per window was half
        the time of :meth:`windows`, and this runs on every vote), and for how many of the next
        updates no window can pass it, whatever they add (``quiet``).

        Why ``quiet`` holds: one update moves ``low * count - sum`` by ``low - x <= low`` and
        ``sum - high * count`` by ``x - high <= 1 - high``; a window started later begins at 0
        on both. So with ``M`` the largest value now (or 0), nothing passes for the next ``s``
        updates while ``M + s * rate < need``. A caller may skip the test for those updates:
        it could only have kept nothing.
        """
        levels, starts, sums, squares = [], [], [], []
        t = self.t
        top_low = top_high = 0.0
        square_rows = self._squares.tolist() if self.squares else None
        for j, row in enumerate(self._sums.tolist()):
            level = self.min_level + j
            step = 1 << level
            cur = (t >> level) << level
            for slot in range(min(SLOTS, (t >> level) + 1)):
                start = cur - slot * step
                n, total = t - start, row[slot]
                below, above = low * n - total, total - high * n
                if below < need and above < need:
                    if below > top_low:
                        top_low = below
                    if above > top_high:
                        top_high = above
                    continue
                levels.append(level)
                starts.append(start)
                sums.append(total)
                if square_rows is not None:
                    squares.append(square_rows[j][slot])
        if starts:
            return self._as_windows(levels, starts, sums, squares), 0
        return self._as_windows(levels, starts, sums, squares), min(
            _quiet_steps(need - top_low, low), _quiet_steps(need - top_high, 1.0 - high))

    def _as_windows(self, levels: list[int], starts: list[int], sums: list[float],
                    squares: list[float]) -> Windows:
        if not starts:  # the monitors' prefilter usually keeps nothing: no arrays to build
            return _EMPTY_SQUARES if self.squares else _EMPTY
        starts_arr = np.array(starts, dtype=np.int64)
        return Windows(np.array(levels, dtype=np.int64), starts_arr,
                       np.array(sums, dtype=np.float64),
                       np.array(squares, dtype=np.float64) if self.squares else None,
                       self.t - starts_arr)

    def to_state(self) -> dict[str, Any]:
        out = {"min_level": self.min_level, "t": self.t, "total": self.total,
               "sums": [list(r) for r in self.sums]}
        if self.squares:
            out["total_sq"] = self.total_sq
        return out

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> RestartedMean:
        try:
            out = cls(min_level=state["min_level"], squares="total_sq" in state)
            t, total, rows = int(state["t"]), float(state["total"]), state["sums"]
            width = out.width
            rows = [[float(v) for v in r] for r in rows]
            total_sq = float(state.get("total_sq", 0.0))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a restart-window state: {exc!r}") from None
        if t < 0 or len(rows) != level_count(t, out.min_level) or any(len(r) != width for r in rows):
            raise ValueError(f"inconsistent state: t={t} needs {level_count(max(t, 0), out.min_level)} "
                             f"levels of {width} sums, got {[len(r) for r in rows]}")
        out.t, out.total, out.total_sq = t, total, total_sq
        block = np.array(rows, dtype=np.float64).reshape(len(rows), width)
        out._sums = block[:, :SLOTS].copy()
        out._squares = block[:, SLOTS:].copy() if out.squares else np.zeros_like(out._sums)
        live = [min(SLOTS, (t >> (out.min_level + j)) + 1) for j in range(len(rows))]
        out._live = np.arange(SLOTS)[None, :] < np.array(live)[:, None]
        return out


def _quiet_steps(gap: float, rate: float) -> int:
    """How many updates, each moving a value by at most ``rate``, surely leave it short of a
    bar ``gap`` away; a margin absorbs the sums' rounding."""
    if rate <= 0.0:
        return _NEVER
    return max(0, math.ceil((gap - _ROUNDING_MARGIN) / rate) - 1)


_NEVER = 1 << 30
_ROUNDING_MARGIN = 1e-6
