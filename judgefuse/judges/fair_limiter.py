"""A concurrency cap shared fairly between tenants: :class:`FairLimiter`.

A plain ``asyncio.Semaphore`` serves waiters first come, first served: a tenant that queues 300
calls in front of a judge makes every other tenant wait behind all 300. Here each tenant has its
own queue, and a freed slot goes to the waiting tenant that holds the fewest slots right now
(ties: the tenant whose last slot was granted longest ago, i.e. round-robin). So a tenant
arriving during another's burst waits at most for the next slot to free (one provider call),
never behind the burst.

That wait for the next free slot is the price of never leaving a slot idle. ``per_tenant`` trades
some of one tenant's throughput for a shorter wait: a named tenant may hold at most that many
slots, so ``capacity - per_tenant`` stay free for others while one tenant bursts alone (the
anonymous tenant ``None`` may use them all).

Within one tenant, calls are served in arrival order. A waiter that is cancelled leaves its
queue; if a slot was already handed to it, the slot is passed on, never lost.

Tenants are any hashable key; ``None`` is the anonymous tenant (offline callers), so without
tenants the limiter is a FIFO semaphore. One limiter belongs to one event loop; state changes
happen in plain (non-``await``) code, so no lock is needed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator, Hashable

__all__ = ["FairLimiter"]


class FairLimiter:
    """At most ``capacity`` holders at once (``per_tenant`` per named tenant); freed slots go to
    waiting tenants fairly."""

    def __init__(self, capacity: int, *, per_tenant: int | None = None) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        if per_tenant is not None and not 1 <= per_tenant <= capacity:
            raise ValueError(f"per_tenant must be between 1 and capacity ({capacity}), got {per_tenant}")
        self.capacity = capacity
        self.per_tenant = per_tenant
        self._in_use = 0
        self._held: dict[Hashable, int] = {}
        self._waiting: dict[Hashable, deque[asyncio.Future[None]]] = {}
        self._granted_at: dict[Hashable, int] = {}  # tenant -> number of its latest grant
        self._grants = 0

    def __repr__(self) -> str:
        return f"FairLimiter(capacity={self.capacity}, in_use={self._in_use}, waiting={self.waiting()})"

    # ------------------------------------------------------------------ reading
    @property
    def in_use(self) -> int:
        """Slots held now."""
        return self._in_use

    def held(self, tenant: Hashable = None) -> int:
        """Slots ``tenant`` holds now."""
        return self._held.get(tenant, 0)

    def waiting(self, tenant: Hashable = ...) -> int:
        """Waiters of ``tenant`` (every tenant's when not given)."""
        if tenant is ...:
            return sum(len(queue) for queue in self._waiting.values())
        queue = self._waiting.get(tenant)
        return 0 if queue is None else len(queue)

    # ------------------------------------------------------------------ acquiring
    @contextlib.asynccontextmanager
    async def slot(self, tenant: Hashable = None) -> AsyncIterator[None]:
        """Hold one slot for ``tenant`` for the body of the ``async with``."""
        await self.acquire(tenant)
        try:
            yield
        finally:
            self.release(tenant)

    async def acquire(self, tenant: Hashable = None) -> None:
        """Wait for a slot (at once when one is free and nobody waits)."""
        if self._in_use < self.capacity and not self._waiting and self._may_take(tenant):
            self._take(tenant)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        queue = self._waiting.get(tenant)
        if queue is None:
            queue = self._waiting[tenant] = deque()
        queue.append(future)
        self._wake()  # a slot may be free while others wait (a waiter just cancelled)
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release(tenant)  # the slot was handed over as we were cancelled: pass it on
            else:
                self._forget(tenant, future)
            raise

    def release(self, tenant: Hashable = None) -> None:
        """Give back a slot ``tenant`` holds; it goes straight to the next fair waiter."""
        held = self._held.get(tenant, 0)
        if held <= 0:
            raise RuntimeError(f"release without a slot held by tenant {tenant!r}")
        if held == 1:
            del self._held[tenant]
        else:
            self._held[tenant] = held - 1
        self._in_use -= 1
        self._wake()

    # ------------------------------------------------------------------ internals
    def _take(self, tenant: Hashable) -> None:
        self._in_use += 1
        self._held[tenant] = self._held.get(tenant, 0) + 1
        self._grants += 1
        self._granted_at[tenant] = self._grants

    def _priority(self, tenant: Hashable) -> tuple[int, int]:
        """Fewest slots held first, then the tenant served longest ago (never: first)."""
        return self._held.get(tenant, 0), self._granted_at.get(tenant, 0)

    def _may_take(self, tenant: Hashable) -> bool:
        """Below the per-tenant cap (the anonymous tenant has none)."""
        return self.per_tenant is None or tenant is None or self._held.get(tenant, 0) < self.per_tenant

    def _wake(self) -> None:
        while self._in_use < self.capacity and self._waiting:
            eligible = [t for t in self._waiting if self._may_take(t)]
            if not eligible:
                return
            tenant = min(eligible, key=self._priority)
            queue = self._waiting[tenant]
            future = queue.popleft()
            if not queue:
                del self._waiting[tenant]
            if future.done():  # cancelled, not yet removed by its task
                continue
            self._take(tenant)
            future.set_result(None)

    def _forget(self, tenant: Hashable, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(tenant)
        if queue is None:
            return
        with contextlib.suppress(ValueError):
            queue.remove(future)
        if not queue:
            del self._waiting[tenant]
        self._wake()  # a waiter ahead of others may have been the only thing blocking them
