"""The retention pass in the background: once at start, then every ``retention_every_s``.

``retention_days`` (settings; None or 0 keeps everything, the default) sets the cut-off: each
pass calls ``Storage.apply_retention(older_than=now - retention_days * 86400,
keep_labelled=refit_max_labels)``, so verdict bodies older than that go while the labels the
refit reads (its newest ``refit_max_labels`` per panel), the records waiting for review, the
accumulators, counters, thresholds and models stay (see the backends for how).

One replica at a time: a pass first takes the named lease ``retention`` of the reserved
tenant ``LEASE_TENANT`` (``Storage.acquire_lease``), renews it while the pass runs, and when
the pass is done keeps holding it until most of the interval has passed, so the other
replicas, whose timers fire too, find it held and skip that round. A replica that dies
mid-pass lets its lease expire (``lease_s``) and the next timer of any replica takes over.
A pass is idempotent, so a pass cut short does no harm: the next one finishes the work.
Failures are logged, never raised into the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from judgefuse.service.storage import Coordination, RecordArchive
from judgefuse.service.storage.retention import RetentionReport

__all__ = ["LEASE_NAME", "LEASE_TENANT", "RetentionJob"]

log = logging.getLogger("judgefuse.service.retention")

LEASE_TENANT = "system"
"""The tenant the job's lease is stored under (leases are per tenant; this job spans all)."""
LEASE_NAME = "retention"
DAY_S = 86400.0


class RetentionJob:
    """Runs ``apply_retention`` on a schedule (module docstring). ``runs`` keeps the reports of
    the passes this replica ran (tests, logs). ``archive`` is the store it prunes, ``leases``
    where the replicas take turns (usually one storage, passed twice)."""

    def __init__(
        self,
        archive: RecordArchive,
        leases: Coordination,
        *,
        retention_days: float | None,
        keep_labelled: int,
        owner: str,
        every_s: float = 3600.0,
        lease_s: float = 600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if every_s <= 0 or lease_s <= 0:
            raise ValueError("every_s and lease_s must be > 0")
        self.archive = archive
        self.leases = leases
        self.retention_days = retention_days or None
        self.keep_labelled = keep_labelled
        self.owner = owner
        self.every_s = every_s
        self.lease_s = lease_s
        self.clock = clock
        self.runs: list[RetentionReport] = []
        self._task: asyncio.Task[Any] | None = None

    @classmethod
    def from_settings(
        cls, settings: Any, archive: RecordArchive, leases: Coordination, *, owner: str,
    ) -> RetentionJob:
        return cls(
            archive, leases, retention_days=settings.storage.retention_days,
            keep_labelled=settings.learning.refit_max_labels, owner=owner,
            every_s=settings.storage.retention_every_s,
        )

    @property
    def enabled(self) -> bool:
        return self.retention_days is not None

    async def run_once(self, *, now: float | None = None) -> RetentionReport | None:
        """One pass if retention is on and this replica gets the lease; its report, else None.
        ``now`` (default: the clock) sets the cut-off ``now - retention_days``."""
        if self.retention_days is None:
            return None
        at = self.clock() if now is None else now
        if not await self.leases.acquire_lease(
                LEASE_TENANT, LEASE_NAME, self.owner, ttl_s=self.lease_s, now=self.clock()):
            log.debug("retention: another replica holds the lease; skipped")
            return None
        started = time.monotonic()
        renew = asyncio.create_task(self._renew(), name="retention-lease")
        try:
            indexed = await self.archive.index_existing_records()
            if indexed:
                log.info("retention: indexed %d records saved before the scan index", indexed)
            older_than = at - self.retention_days * DAY_S
            report = await self.archive.apply_retention(
                older_than=older_than, keep_labelled=self.keep_labelled, now=at)
        finally:
            renew.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renew
        took = time.monotonic() - started
        # hold the lease for most of the interval: the other replicas skip this round
        hold = max(1.0, 0.9 * self.every_s - took)
        await self.leases.acquire_lease(LEASE_TENANT, LEASE_NAME, self.owner, ttl_s=hold,
                                        now=self.clock())
        self.runs.append(report)
        log.info(
            "retention: dropped %d verdict records older than %s (kept %d pending review, "
            "%d in the labelled window of %d per panel) in %.1f s",
            report.dropped, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(older_than)),
            report.kept_pending, report.kept_labelled, self.keep_labelled, took,
        )
        return report

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            await self.leases.acquire_lease(LEASE_TENANT, LEASE_NAME, self.owner,
                                            ttl_s=self.lease_s, now=self.clock())

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_once()
            except Exception as exc:  # a failed pass must never take the service down
                log.error("retention pass failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
            await asyncio.sleep(self.every_s)

    def start(self) -> None:
        """Run a pass now and then every ``every_s`` (nothing when retention is off)."""
        if self.enabled and self._task is None:
            self._task = asyncio.create_task(self._loop(), name="retention")

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
