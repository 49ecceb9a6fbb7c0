"""Reports over stored verdicts: few at once, off the event loop, and not repeated while the data
has not changed (docs/design.md, 'Reports').

A report reads a panel's stored verdicts, parses them and computes over them: the win rate
(every verdict of the window), the disagreement list (the newest 500 labelled), the panel
structure (the newest ``panel_structure_window`` and a Dawid-Skene fit) and the console's lists
and overview (up to a thousand records a page). Done on the event loop, one tenant polling a win
rate over 2,000 stored verdicts moved another tenant's ``/v1/fuse`` from p50/p99 7/30 ms to
459/832 ms: every request in flight waited out each parse. So every such request
goes through :class:`Reports`:

* **off the loop**: storage calls stay on the loop (they are async and hand their own work to
  the backend's thread or socket), the scan is read a page at a time, and parsing and
  computing run in worker threads (``storage.checks.parse_records`` for the pages,
  :meth:`Reports.run` for the computation), so the loop is held for one page's hand-off at a
  time, never for the scan;
* **admitted**: a computation holds one of ``estimates.max_inflight_reports`` places (a
  :class:`~judgefuse.places.Places`); past them it waits in line up to
  ``estimates.report_wait_s``, then 429 with ``Retry-After`` and the body of
  :meth:`~judgefuse.service.errors.Overloaded.shed` naming ``max_inflight_reports``. A worker
  thread still takes the interpreter's lock a switch interval at a time, so the bound is what
  keeps several reports from crowding the loop out of it;
* **cached by the data's version** (:func:`data_version`): a report kept beside the counters it
  was read under is answered again, with no scan and no place, while they have not moved;
* **paced** (the win rate, whose cached answer reads nothing from the store): each tenant's
  polls at ``estimates.report_polls_per_s`` (:meth:`Reports.pace`), so clients polling in a
  closed loop sleep for their turn instead of taking the gateway's CPU.

Each outcome is counted in ``judgefuse_report_reads_total`` {tenant, report, outcome:
``computed``, ``cached``, ``refused``}; refusals also in ``judgefuse_admission_rejected_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import TypeVar

from judgefuse.places import Places
from judgefuse.service.errors import Overloaded
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.ledger import ALL_METHODS, panel_prefix, traffic_prefix
from judgefuse.service.storage import LabelLedger

__all__ = ["LIMIT", "Reports", "data_version"]

T = TypeVar("T")

LIMIT = "max_inflight_reports"
"""The setting a refusal by the gate names (``estimates.max_inflight_reports``)."""
PACE = "report_polls_per_s"
"""The setting a refusal by a tenant's pace names (``estimates.report_polls_per_s``)."""
_MAX_PACED_TENANTS = 4096
"""Tenants whose pace is remembered before those back to a full allowance are forgotten."""
_EWMA_WEIGHT = 0.2
"""Weight of the newest computation in the typical one ``Retry-After`` is made of."""
_MAX_RETRY_AFTER_S = 60


async def data_version(storage: LabelLedger, tenant: str, panel: str) -> tuple[object, ...]:
    """What moves whenever a verdict of (tenant, panel) is stored, labelled, relabelled or undone:
    the panel's all-method traffic counters (``save_verdict`` adds to them in the insert's own
    atomic step), its A/B-labelled count, its methods' agreement counters (one field per
    (answer, label) pair: a relabel A -> B moves them when the count stays) and its tie and
    both-bad label counters (:mod:`judgefuse.service.ledger`). Counters, not a clock: they are
    shared by every replica, so another process's verdict moves them too; and small ones (the
    method accumulators' thousand bins, which the disagreement list's label version also reads,
    are left out: this is read on every poll). Retention dropping old unlabelled verdicts moves
    none of them; readers redo a read after a maximum age."""
    keys: list[str] = []
    for prefix in (traffic_prefix(panel, ALL_METHODS), f"{panel_prefix(panel)}agreement/method/",
                   f"{panel_prefix(panel)}labels/"):
        keys += await storage.list_accumulators(tenant, prefix)
    counters = tuple([(key, tuple(sorted((await storage.read_accumulator(tenant, key)).items())))
                      for key in keys])
    return (await storage.count_labelled(tenant, panel), counters)


class Reports:
    """The admission gate, worker hand-off and counters of every report (module docstring)."""

    def __init__(self, limit: int, wait_s: float, *, polls_per_s: float = 0.0,
                 metrics: ServiceMetrics | None = None,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        if limit < 1:
            raise ValueError("limit must be >= 1")
        if not polls_per_s >= 0:
            raise ValueError("polls_per_s must be >= 0")
        self.places = Places(limit, wait_s)
        self.polls_per_s = polls_per_s
        """Each tenant's paced reports (:meth:`pace`) per second, in bursts of up to a second's
        worth (at least one); 0: unpaced."""
        self.monotonic = monotonic
        self._due: dict[str, float] = {}
        """tenant -> when its allowance is whole again (the GCRA's theoretical arrival time)."""
        self.metrics = metrics
        self.counts: Counter[tuple[str, str]] = Counter()
        """(report, outcome) -> requests of this process (``computed``, ``cached``, ``refused``)."""
        self.worker_hook: Callable[[str], None] | None = None
        """Called with the report's name in the worker thread before each computation step: a
        test's handle on where the work runs, and on how long it holds its place."""
        self._typical_s: float | None = None

    @property
    def limit(self) -> int:
        return self.places.limit

    def retry_after_s(self) -> int:
        """Whole seconds a refused caller should wait: about one typical computation (at least 1)."""
        typical = self._typical_s or 0.0
        return max(1, min(_MAX_RETRY_AFTER_S, math.ceil(typical)))

    def count(self, tenant: str, report: str, outcome: str) -> None:
        self.counts[(report, outcome)] += 1
        if self.metrics is not None:
            self.metrics.child(self.metrics.report_reads, tenant, report, outcome).inc()

    async def pace(self, tenant: str, report: str) -> None:
        """Hold a tenant's reports to :attr:`polls_per_s` (the generic cell rate algorithm: a
        burst of up to a second's worth at once, then one per ``1 / polls_per_s``): a report
        early for its turn sleeps until then, at most ``report_wait_s``; one whose turn is
        further off is refused with :class:`Overloaded` (429, ``Retry-After`` when it comes)
        naming ``report_polls_per_s``. A cached answer costs the loop about a millisecond and
        no wait, so clients polling in a closed loop would otherwise take as much of the
        gateway's CPU as they can; a sleeping poll costs nothing."""
        rate = self.polls_per_s
        if rate <= 0:
            return
        now = self.monotonic()
        interval = 1.0 / rate
        tolerance = (max(1.0, rate) - 1.0) * interval
        due = max(self._due.get(tenant, now), now)
        wait = due - tolerance - now
        if wait > self.places.wait_s:
            self.count(tenant, report, "refused")
            if self.metrics is not None:
                self.metrics.child(self.metrics.admission_rejected, tenant, PACE).inc()
            retry_after = max(1, min(_MAX_RETRY_AFTER_S, math.ceil(wait)))
            raise Overloaded.shed(
                PACE, None, retry_after,
                f"reports of this tenant are paced at {rate:g} per second and its next turn is "
                f"{wait * 1000:.0f} ms away (more than {self.places.wait_s * 1000:g} ms)")
        self._due[tenant] = due + interval
        if len(self._due) > _MAX_PACED_TENANTS:
            for name in [name for name, when in self._due.items() if when <= now]:
                del self._due[name]
        if wait > 0:
            await asyncio.sleep(wait)

    @contextlib.asynccontextmanager
    async def admit(self, tenant: str, report: str) -> AsyncIterator[None]:
        """Hold a place for one computation of ``report`` (counted ``computed``), or raise
        :class:`Overloaded` (429) when none came within ``report_wait_s``."""
        if not await self.places.acquire():
            self.count(tenant, report, "refused")
            if self.metrics is not None:
                self.metrics.child(self.metrics.admission_rejected, tenant, LIMIT).inc()
            limit, wait_ms = self.places.limit, self.places.wait_s * 1000
            raise Overloaded.shed(
                LIMIT, limit, self.retry_after_s(),
                f"{limit} report computation(s) over stored verdicts in progress "
                f"({self.places.waiting} waiting) and none finished within {wait_ms:g} ms")
        self.count(tenant, report, "computed")
        started = time.monotonic()
        try:
            yield
        finally:
            self.places.release()
            took = time.monotonic() - started
            typical = self._typical_s
            self._typical_s = took if typical is None else typical + _EWMA_WEIGHT * (took - typical)

    async def run(self, report: str, fn: Callable[..., T], *args: object) -> T:
        """``fn(*args)`` in a worker thread (:attr:`worker_hook` first)."""
        hook = self.worker_hook

        def call() -> T:
            if hook is not None:
                hook(report)
            return fn(*args)

        return await asyncio.to_thread(call)
