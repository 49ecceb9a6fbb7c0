"""The event loop's lag: how late a timer fires, measured all the time, and whether the loop is
past its capacity.

Every request of a replica is served by one event loop. When work arrives faster than the loop
can do it (CPU, or a stall: a long fit, a large JSON encoding run on the loop), ready callbacks
queue and every timer fires late; the lateness of a timer set ``interval_s`` ahead is the time
any request waited for the loop in that moment. :class:`LoopLag` schedules such a timer again
and again (``loop.call_later``: one cheap callback per interval, no task), observes each
lateness into the ``judgefuse_event_loop_lag_seconds`` histogram (``/metrics``) and keeps the
smallest lateness of the current and the last window.

**Overloaded** (:meth:`LoopLag.overloaded`) follows CoDel (Nichols and Jacobson, "Controlling
Queue Delay", 2012): the loop is past capacity when even the *smallest* lag of a whole window
(``window_s``) was above the target. One stall (a garbage collection, a burst) makes one timer
late, not every timer of a window, so it never trips it; a queue that does not drain does.
Admission reads it on every guarded request (one comparison) and answers 429 while it holds
(:mod:`judgefuse.service.web.backpressure`). See docs/design.md, 'Scale'.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LoopLag"]


class LoopLag:
    """A timer's lateness, sampled every ``interval_s`` on the running loop (module docstring)."""

    def __init__(
        self,
        histogram: Any | None = None,
        *,
        interval_s: float = 0.01,
        window_s: float = 0.2,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if interval_s <= 0 or window_s <= 0:
            raise ValueError("interval_s and window_s must be > 0")
        self.histogram = histogram
        self.interval_s = interval_s
        self.window_s = window_s
        self.clock = clock
        self._handle: asyncio.TimerHandle | None = None
        self._due = 0.0
        self._window_end = 0.0
        self._window_min = math.inf
        self._last_min = 0.0
        """The smallest lag of the last complete window (0 before one completed)."""
        self.samples = 0
        self.worst_s = 0.0
        """The largest lag seen since start (for tests and the benchmark's notes)."""

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Begin sampling on the running loop (again after :meth:`stop`; no-op when running)."""
        if self._handle is not None:
            return
        now = self.clock()
        self._window_end = now + self.window_s
        self._window_min = math.inf
        self._schedule(now)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def running(self) -> bool:
        return self._handle is not None

    # ------------------------------------------------------------------ reads
    def recent_min_s(self) -> float:
        """The smallest lag over the last complete window, or over the current one when it
        already passed its end unobserved (a loop so stalled that no timer fired since)."""
        now = self.clock()
        if self._handle is not None and now > self._window_end + self.window_s:
            # no sample closed the window for a whole window: the loop is that late itself
            return max(self._last_min, now - self._due)
        return self._last_min

    def overloaded(self, target_s: float) -> bool:
        """True while every timer of the last window fired more than ``target_s`` late."""
        return target_s > 0 and self.recent_min_s() > target_s

    # ------------------------------------------------------------------ the timer
    def _schedule(self, now: float) -> None:
        self._due = now + self.interval_s
        self._handle = asyncio.get_running_loop().call_later(self.interval_s, self._tick)

    def _tick(self) -> None:
        now = self.clock()
        lag = max(0.0, now - self._due)
        self.samples += 1
        if lag > self.worst_s:
            self.worst_s = lag
        if self.histogram is not None:
            self.histogram.observe(lag)
        if lag < self._window_min:
            self._window_min = lag
        if now >= self._window_end:
            self._last_min = self._window_min
            self._window_min = math.inf
            self._window_end = now + self.window_s
        self._schedule(now)
