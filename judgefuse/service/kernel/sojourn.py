"""The time verdicts spend inside the app (``timings.overhead_s``: all but the slowest judge
call), and whether the app is queueing them: the second of backpressure's capacity signals.

The loop's lag (:mod:`judgefuse.service.kernel.loop_lag`) sees work waiting for the loop;
it does not see work waiting behind the loop's back: verdicts queued for the store's group
commit, or for the GIL a storage thread holds. At 150% of ``/v1/fuse``'s max the loop's lag
stayed under the shedding target for most windows while admitted requests waited 50-280 ms for
the store (``bench_gateway.py``, load average ~14): the queue was there, one step further on.
:class:`Sojourn` watches the verdicts' own time in the app instead.

Like the loop's lag it follows CoDel (Nichols and Jacobson, 2012): the app is queueing when even
the *shortest* in-app time of a whole window (``window_s``, at least ``min_samples`` verdicts)
was above the target. One slow verdict (a commit that met a slow fsync) never trips it; a
queue that does not drain does, and a window with too few verdicts to tell (low traffic) never
does. Reading it is one comparison (:meth:`Sojourn.overloaded`). See docs/design.md, 'Scale'.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import time
from collections.abc import Callable, Iterator

from judgefuse.places import Places

__all__ = ["Sojourn", "Working"]


class Sojourn:
    """The smallest in-app time per window of completed verdicts (module docstring)."""

    def __init__(self, *, window_s: float = 0.1, min_samples: int = 4,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if window_s <= 0 or min_samples < 1:
            raise ValueError("window_s must be > 0 and min_samples >= 1")
        self.window_s = window_s
        self.min_samples = min_samples
        self.clock = clock
        self._window_end = 0.0
        self._window_min = math.inf
        self._window_n = 0
        self._last_min = 0.0
        """The smallest in-app time of the last window that had ``min_samples`` verdicts (0
        before one, or after a window with fewer: too little traffic to be a queue)."""
        self._last_end = 0.0

    def observe(self, seconds: float) -> None:
        """One verdict's in-app time (``timings.overhead_s``)."""
        now = self.clock()
        if now >= self._window_end:
            self._close(now)
        self._window_n += 1
        if seconds < self._window_min:
            self._window_min = seconds

    def _close(self, now: float) -> None:
        self._last_min = self._window_min if self._window_n >= self.min_samples else 0.0
        self._last_end = self._window_end
        self._window_min = math.inf
        self._window_n = 0
        self._window_end = now + self.window_s

    def recent_min_s(self) -> float:
        """The smallest in-app time of the last complete window; 0 once that window is more
        than a window old (no verdict finished since: nothing to say it is still queueing)."""
        if self.clock() > self._window_end + self.window_s:
            return 0.0
        return self._last_min

    def overloaded(self, target_s: float) -> bool:
        """True while every verdict of the last window spent more than ``target_s`` in the app."""
        return target_s > 0 and self.recent_min_s() > target_s


_COUNTED: contextvars.ContextVar[Working | None] = contextvars.ContextVar(
    "judgefuse_working", default=None)


class Working(Places):
    """Judging requests doing the gateway's own work right now: admitted and not answered, less
    those waiting for their judge calls (:meth:`away`). The third capacity signal, and the only
    one that reads the queue *now*: the loop's lag and the verdicts' in-app time both describe
    the last window, so a gate on them alone admits a burst, sheds while it drains, admits the
    next burst; past ``/v1/fuse``'s capacity the admitted requests' p99 was 391 ms that way
    (``benchmarks/bench_gateway.py``). Bounding this count bounds the in-app queue at about
    ``count / service rate`` (Little's law) whatever the judges' latency, since a request
    waiting for its judges is not counted.

    It is a :class:`~judgefuse.places.Places` (``limit``: ``server.
    max_inflight_work``, ``wait_s``: ``server.work_wait_s``, ``lifo_after_s``: ``server.
    work_lifo_after_s``, set by backpressure):
    :meth:`~judgefuse.places.Places.acquire` admits a request or makes it
    wait its turn; :meth:`enter` marks the request's context and gives its place back when it
    answers; :meth:`away` (the judging pipeline, around its judge calls) gives the place back
    meanwhile and takes one again after, without waiting (the request was admitted), and only
    acts in a marked context, so batches and callers outside a request count nothing. Plain
    code on one loop: no lock."""

    @property
    def count(self) -> int:
        return self.held

    @contextlib.contextmanager
    def enter(self, *, admitted: bool = False) -> Iterator[None]:
        """One request, counted until it answers (``admitted``: its place is already held,
        from :meth:`~judgefuse.places.Places.acquire`)."""
        if not admitted:
            self.take()
        token = _COUNTED.set(self)
        try:
            yield
        finally:
            _COUNTED.reset(token)
            self.release()

    @staticmethod
    @contextlib.contextmanager
    def away() -> Iterator[None]:
        """Not counted while inside (the request's judge calls); a no-op outside a counted
        request."""
        working = _COUNTED.get()
        if working is None:
            yield
            return
        working.release()
        try:
            yield
        finally:
            working.take()
