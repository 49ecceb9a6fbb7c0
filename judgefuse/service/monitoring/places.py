"""A waiting room of places: at most ``limit`` holders, later callers wait their turn briefly.

Backpressure bounds two kinds of work this way: label and review requests (a place is a storage
connection) and judging requests doing the gateway's own work (:class:`~judgefuse.service.
monitoring.sojourn.Working`). Refusing at once when the places are taken turns every short
burst into 429s (a closed loop of 32 ``/v1/judge`` clients, whose judges answer together, fell
from 319 to 256 verdicts/s at a bound of 8 refused at once, in an A/B of the same minutes);
letting the excess wait without bound is the collapse the bound exists to prevent. So a caller past the limit waits in order, up to ``wait_s``, for a place
handed straight to it by the holder that gives one back, and is refused only when none came in
time (or when ``max_waiting`` are already waiting).

Plain code on one event loop: no lock.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Places"]


class Places:
    """At most ``limit`` holders (0: no limit); see the module docstring."""

    def __init__(self, limit: int = 0, wait_s: float = 0.0, *, max_waiting: int | None = None) -> None:
        if limit < 0 or wait_s < 0:
            raise ValueError("limit and wait_s must be >= 0")
        self.limit = limit
        self.wait_s = wait_s
        self.max_waiting = max(1024, 4 * limit) if max_waiting is None else max_waiting
        self.held = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self, wait_s: float | None = None) -> bool:
        """True: a place is held (give it back with :meth:`release`); False: refuse.

        ``wait_s`` (at most this room's own ``wait_s``) shortens this caller's wait: what is
        left of a budget it has partly spent before reaching the room."""
        if self.limit == 0 or (self.held < self.limit and not self._waiters):
            self.held += 1
            return True
        wait_s = self.wait_s if wait_s is None else min(self.wait_s, wait_s)
        if len(self._waiters) >= self.max_waiting or wait_s <= 0:
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
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
        """Give a place back: straight to the oldest live waiter when that leaves at most
        ``limit`` held; otherwise one fewer is held."""
        if self.limit and self.held <= self.limit:
            while self._waiters:
                waiter = self._waiters.popleft()
                if not waiter.done():
                    waiter.set_result(None)  # the place passes on: held stays the same
                    return
        self.held -= 1
