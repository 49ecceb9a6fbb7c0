"""Restart candidates on a dyadic grid, and how the error budget is spread over them.

Why restarts: one confidence sequence over everything since tuning averages a late drop with
the good past, so it reacts slowly (a drop from 0.90 to 0.70 after 200-1,000 good labels took a
median ~970 labels and was missed half the time within 2,000). Here every *candidate* is a
confidence sequence over the labels since its own start, and an alarm fires when any candidate
excludes the target: the candidate that started just after the change sees only bad labels.

**The grid.** Level ``k`` (``k >= min_level``) starts a candidate every ``2^k`` labels: starts
``s = i * 2^k`` (``i = 0, 1, 2, ...``). After ``t`` labels each level keeps only its two most
recent starts, ``cur = floor(t / 2^k) * 2^k`` and ``prev = cur - 2^k`` (when >= 0), i.e. a
window of between 0 and ``2^(k+1)`` labels; levels run from ``min_level`` up to the first one
whose ``cur`` start is 0 (``max(min_level, bit_length(t))``). So a change is followed, at every
scale ``2^k``, by a candidate that starts at most ``2^k`` labels after it and lives for ``2^k``
to ``2^(k+1)`` labels: the level near the needed evidence catches it. That is ``O(log t)``
candidates, updated in ``O(log t)`` per label, stored as two sums per level.

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
from typing import Any

import numpy as np

__all__ = ["DEFAULT_MIN_LEVEL", "check_min_level", "level_count", "log_threshold", "window_starts"]

#: Shortest restart spacing 2^5 = 32 labels. Shorter windows can only flag bursts of errors
#: and take budget from the scales a 10-point drop needs (a few hundred labels): on drops
#: 0.90 -> 0.75 (target 0.85) the median delay was 396 labels with min_level 3, 376 with 4 and
#: 355 with 5. A collapse to precision 0.3 is still caught within ~32-64 labels.
DEFAULT_MIN_LEVEL = 5


def check_min_level(min_level: Any) -> int:
    if isinstance(min_level, bool) or not isinstance(min_level, (int, np.integer)) or not (
        0 <= min_level <= 40
    ):
        raise ValueError(f"min_level must be an integer in [0, 40], got {min_level!r}")
    return int(min_level)


def level_count(t: int, min_level: int) -> int:
    """Number of levels in use after ``t`` labels: ``min_level .. max(min_level, bit_length(t))``."""
    return max(min_level, int(t).bit_length()) - min_level + 1


def window_starts(t: Any, level: int) -> tuple[Any, Any]:
    """The ``(cur, prev)`` start of level ``level`` after ``t`` labels (ints or int arrays).

    ``prev`` is -1 where it does not exist yet. Windows cover labels ``start+1 .. t``.
    """
    cur = (t >> level) << level
    prev = cur - (1 << level)
    if isinstance(prev, np.ndarray):
        prev = np.where(prev >= 0, prev, -1)
    elif prev < 0:
        prev = -1
    return cur, prev


def log_threshold(alpha: float, level: Any, start: Any, min_level: int) -> Any:
    """``log(1 / alpha_(k,i))`` for the candidate of level ``k`` starting at label ``start``."""
    j = np.asarray(level) - min_level
    i = np.asarray(start) >> np.asarray(level)
    out = (-math.log(alpha) + np.log((j + 1.0) * (j + 2.0)) + np.log((i + 1.0) * (i + 2.0)))
    return float(out) if np.ndim(out) == 0 else out
