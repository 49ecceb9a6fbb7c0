"""Background refits, one per round of labels, across every replica (docs/design.md, 'Scale').

:class:`RefitScheduler` counts a (tenant, panel)'s labels (or, for the cold start, its verdicts)
and runs a refit each time the count crosses a multiple of ``every``, once cluster-wide.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from judgefuse.service.storage import Coordination

__all__ = ["RefitScheduler"]

log = logging.getLogger("judgefuse.service.learning.refit")
"""The refit's logger: a background refit's failure is logged where a refit's are."""


class RefitScheduler:
    """Background refits every ``every`` labels of a (tenant, panel): one per round, one at a
    time, across every replica that shares the storage.

    Counting is shared through storage: a replica's own labels are only a hint to look (every
    ``check_every`` local labels, default ``every // 4``, it reads the panel's labelled count
    from storage with ``count``: ``count_labelled`` of the label ledger); the count's round is
    ``count // every``. To refit a round a replica must
    take, in this order, the panel's running lease ``refit/{panel}`` (``lease_s``: one refit at
    a time; renewed by no one, so a crashed replica's lease frees itself) and the round's
    marker ``refit/{panel}/round/{r}`` (held ``marker_ttl_s``: a round is refit once however many
    replicas saw it cross). Losing either means someone else has it: nothing to do. A check
    that loses the running lease leaves the round unmarked, so a later check retries it.
    Model and threshold versions come from storage's atomic counters, so they strictly increase
    whichever replica promotes; every replica serves a promotion within ``state_ttl_s`` (the
    state cache's freshness, :mod:`judgefuse.service.learning.state_cache`).

    ``runs`` lists the (tenant, panel, round) this replica refit (tests, logs).

    The same machinery runs the label-free cold start (:mod:`judgefuse.service.learning.cold_start`):
    ``count`` then counts the panel's verdicts instead of its labels and ``lease`` names its
    own leases (``cold_start/{panel}``, ``cold_start/{panel}/round/{r}``); ``note`` is
    ``note_label`` under the name that says so.
    """

    def __init__(
        self,
        every: int,
        run: Callable[[str, str], Any],
        *,
        storage: Coordination,
        owner: str,
        count: Callable[[str, str], Awaitable[int]],
        check_every: int | None = None,
        lease_s: float = 900.0,
        marker_ttl_s: float = 30 * 86400.0,
        clock: Callable[[], float] = time.time,
        lease: str = "refit",
    ) -> None:
        self._count = count
        self.lease = lease
        self.every = every
        self.check_every = max(1, check_every if check_every is not None else every // 4)
        self.storage = storage
        self.owner = owner
        self.lease_s = lease_s
        self.marker_ttl_s = marker_ttl_s
        self.clock = clock
        self._run = run
        self._since: dict[tuple[str, str], int] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self._done: dict[tuple[str, str], int] = {}
        """The last round this replica ran per (tenant, panel)."""
        self._again: set[tuple[str, str]] = set()
        """Panels noted while their check ran: checked once more when it ends."""
        self._closed = False
        self.runs: list[tuple[str, str, int]] = []

    def note_label(self, tenant: str, panel: str) -> None:
        if self.every <= 0:
            return
        key = (tenant, panel)
        self._since[key] = self._since.get(key, 0) + 1
        if self._since[key] < self.check_every:
            return
        self._since[key] = 0
        if key in self._tasks:
            # a check is reading the count right now and may have read it before these labels
            # landed: look again when it ends, or the round they complete waits for more labels
            self._again.add(key)
            return
        self._start(key)

    note = note_label

    def _start(self, key: tuple[str, str]) -> None:
        tenant, panel = key
        task = asyncio.create_task(self._guarded(tenant, panel), name=f"{self.lease}:{tenant}:{panel}")
        self._tasks[key] = task
        task.add_done_callback(functools.partial(self._forget, key))

    def _forget(self, key: tuple[str, str], _task: asyncio.Task[Any]) -> None:
        self._tasks.pop(key, None)
        if key in self._again and not self._closed:
            self._again.discard(key)
            self._start(key)

    async def _check(self, tenant: str, panel: str) -> None:
        """Refit the current round if no replica has (the class docstring)."""
        round_ = await self._count(tenant, panel) // self.every
        if round_ < 1 or round_ <= self._done.get((tenant, panel), 0):
            # a lease's owner may take it again, so the round marker alone would let this
            # replica redo a round it already ran: it remembers its own
            return
        running = f"{self.lease}/{panel}"
        if not await self.storage.acquire_lease(tenant, running, self.owner, ttl_s=self.lease_s, now=self.clock()):
            return
        try:
            marker = f"{self.lease}/{panel}/round/{round_}"
            if not await self.storage.acquire_lease(
                tenant, marker, self.owner, ttl_s=self.marker_ttl_s, now=self.clock()
            ):
                return
            self.runs.append((tenant, panel, round_))
            self._done[(tenant, panel)] = round_
            await self._run(tenant, panel)
        finally:
            await self.storage.release_lease(tenant, running, self.owner)

    async def _guarded(self, tenant: str, panel: str) -> None:
        try:
            await self._check(tenant, panel)
        except Exception as exc:  # a background refit must never take the service down
            log.error("background %s of %s/%s failed: %s", self.lease, tenant, panel, type(exc).__name__, exc_info=exc)

    async def idle(self) -> None:
        """Wait for running refits (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)
