"""A waiting room of places: at most ``limit`` holders, later callers wait their turn briefly.

Three bounds use it. The judges' HTTP client holds at most ``max_connections`` requests in
flight (:class:`~judgefuse.judges.transport.http1.HTTPClient`: a caller waits in line until its
call's deadline). The gateway's backpressure bounds label and review requests (a place is a
storage connection) and judging requests doing the gateway's own work (:class:`~judgefuse.
service.monitoring.sojourn.Working`). It sits under every room so the two layers share one
line instead of each writing its own.

Refusing at once when the places are taken turns every short burst into 429s (a closed loop of
32 ``/v1/judge`` clients, whose judges answer together, fell from 319 to 256 verdicts/s at a
bound of 8 refused at once, in an A/B of the same minutes); letting the excess wait without
bound is the collapse the bound exists to prevent. So a caller past the limit waits in order,
up to ``wait_s``, for a place handed straight to it by the holder that gives one back, and is
refused only when none came in time (or when ``max_waiting`` are already waiting).

**Adaptive LIFO** (``lifo_after_s``; "Fail at Scale", Maurer, ACM Queue 2015). In order is
right for a burst: the line drains and everyone is served. Past capacity the line never drains,
and in order is the worst choice: a place reaches each caller just before its ``wait_s`` runs
out, so *every* admitted request carries nearly the whole wait (``/v1/fuse`` at 1,200/s, past
its capacity, timed inside the gateway: the admitted requests' wait for a place p50 49.9 ms,
p99 58.1 ms, of a 50 ms ``wait_s``). So once the line has stood without a break for
``lifo_after_s``, a place freed goes to the *newest* caller, who has waited least; the oldest
run out their ``wait_s`` and are refused as before. Below capacity the line
empties within a burst and the order stays first come, first served. In an A/B of the same
minutes (``benchmarks/results/lifo_ab.txt``, 4 rounds, ``lifo_after_s`` 0.02 s) it cut
``/v1/fuse``'s admitted p50 / p99 at 150% of its max from 64 / 82 ms to 18 / 43 ms (medians)
with no more 429s; with 0.1 s the p50 fell as far but not the p99: the first tenth of a second
of the overload, still served in order, is more than 1% of the admitted requests.

Plain code on one event loop: no lock.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

__all__ = ["Places"]


class Places:
    """At most ``limit`` holders (0: no limit); see the module docstring."""

    def __init__(self, limit: int = 0, wait_s: float = 0.0, *, max_waiting: int | None = None,
                 lifo_after_s: float = 0.0, clock: Callable[[], float] = time.monotonic) -> None:
        if limit < 0 or wait_s < 0 or lifo_after_s < 0:
            raise ValueError("limit, wait_s and lifo_after_s must be >= 0")
        self.limit = limit
        self.wait_s = wait_s
        self.max_waiting = max(1024, 4 * limit) if max_waiting is None else max_waiting
        self.lifo_after_s = lifo_after_s
        """Once callers have been waiting without a break this long, a freed place goes to the
        newest of them (0: always the oldest); see the module docstring."""
        self.clock = clock
        self.held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._line_since = 0.0
        """When the line last went from empty to one caller."""

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def try_take(self) -> bool:
        """Hold a place if one is free and nobody is in line (no coroutine: the common case of a
        hot path); False: call :meth:`acquire` to wait for one."""
        if self.limit == 0 or (self.held < self.limit and not self._waiters):
            self.held += 1
            return True
        return False

    async def acquire(self, wait_s: float | None = None) -> bool:
        """True: a place is held (give it back with :meth:`release`); False: refuse.

        ``wait_s`` (at most this room's own ``wait_s``) shortens this caller's wait: what is
        left of a budget it has partly spent before reaching the room."""
        if self.try_take():
            return True
        wait_s = self.wait_s if wait_s is None else min(self.wait_s, wait_s)
        if len(self._waiters) >= self.max_waiting or wait_s <= 0:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self._waiters:
            self._line_since = self.clock()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(wait_s):
                await waiter
        except TimeoutError:
            if waiter.done() and not waiter.cancelled():  # handed a place as the timer fired
                return True
            return False
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a place, then cancelled: pass it on
            raise
        finally:
            if not waiter.done():
                waiter.cancel()
            try:
                self._waiters.remove(waiter)
            except ValueError:
                pass
        return True

    def take(self) -> None:
        """Hold a place whatever the limit (work already admitted coming back, e.g. a judging
        request whose judges answered): it may leave more than ``limit`` held for a while."""
        self.held += 1

    def release(self) -> None:
        """Give a place back: straight to a live waiter when that leaves at most ``limit`` held
        (the oldest; the newest once the line has stood ``lifo_after_s``); otherwise one fewer
        is held."""
        if self.limit and self.held <= self.limit:
            take = self._waiters.popleft
            if self.lifo_after_s and self._waiters and self.clock() - self._line_since >= self.lifo_after_s:
                take = self._waiters.pop
            while self._waiters:
                waiter = take()
                if not waiter.done():
                    waiter.set_result(None)  # the place passes on: held stays the same
                    return
        self.held -= 1
