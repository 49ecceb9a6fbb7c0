"""Admission control: a bounded number of judge requests in flight, per tenant and in total.

Without it, overload has only one answer: every request queues at the judges' concurrency caps
until the panel deadline passes, and the caller gets a 503 after the gateway spent judge calls
on it. With it, a request over a limit is refused at once, before any judge is called, with
429 and ``Retry-After`` (:class:`~judgefuse.service.errors.Overloaded`):

* ``max_inflight_per_tenant``: one tenant's requests in flight (its burst cannot fill the queue
  every tenant shares);
* ``max_inflight_total``: every tenant's together (what this replica takes on at once).

A request is in flight from admission to its answer (judging, fusing, storing). Each item of
``/v1/judge/batch`` is admitted on its own: items over a limit come back with status 429 and
``retry_after_s`` in their error, the others are judged.

``Retry-After`` is the typical time an admitted request takes to finish (an exponentially
weighted mean of recent ones, whole seconds, 1 to 60; 1 before any has finished): about when
one in-flight slot will be free again.

State changes are plain (non-``await``) code, so one :class:`Admission` serves any number of
tasks in one event loop without a lock.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from judgefuse.service.errors import Overloaded

if TYPE_CHECKING:
    from judgefuse.service.kernel.metrics import ServiceMetrics
    from judgefuse.service.settings import Settings

__all__ = ["Admission"]

_EWMA_WEIGHT = 0.2
_MIN_RETRY_AFTER_S = 1
_MAX_RETRY_AFTER_S = 60


class Admission:
    """In-flight budgets (module docstring). Build with :meth:`from_settings`."""

    def __init__(
        self,
        *,
        max_per_tenant: int,
        max_total: int,
        metrics: ServiceMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_per_tenant < 1 or max_total < 1:
            raise ValueError("max_per_tenant and max_total must be >= 1")
        self.max_per_tenant = max_per_tenant
        self.max_total = max_total
        self.metrics = metrics
        self.clock = clock
        self._per_tenant: dict[str, int] = {}
        self._total = 0
        self._typical_s: float | None = None
        self.rejected = 0
        """Requests refused so far (either limit)."""

    @classmethod
    def from_settings(cls, settings: Settings, metrics: ServiceMetrics | None = None) -> Admission:
        return cls(
            max_per_tenant=settings.judging.max_inflight_per_tenant,
            max_total=settings.judging.max_inflight_total,
            metrics=metrics,
        )

    def inflight(self, tenant: str | None = None) -> int:
        """Requests in flight for ``tenant`` (all tenants' when None)."""
        return self._total if tenant is None else self._per_tenant.get(tenant, 0)

    def retry_after_s(self) -> int:
        """Whole seconds a refused caller should wait (module docstring)."""
        if self._typical_s is None:
            return _MIN_RETRY_AFTER_S
        return min(_MAX_RETRY_AFTER_S, max(_MIN_RETRY_AFTER_S, math.ceil(self._typical_s)))

    @contextlib.contextmanager
    def admit(self, tenant: str) -> Iterator[None]:
        """Hold one in-flight place for ``tenant``; raises :class:`Overloaded` (429) over a limit."""
        held = self._per_tenant.get(tenant, 0)
        if held >= self.max_per_tenant:
            self._refuse(tenant, "max_inflight_per_tenant", self.max_per_tenant)
        if self._total >= self.max_total:
            self._refuse(tenant, "max_inflight_total", self.max_total)
        self._per_tenant[tenant] = held + 1
        self._total += 1
        self._gauge(tenant, 1)
        started = self.clock()
        try:
            yield
        finally:
            left = self._per_tenant[tenant] - 1
            if left:
                self._per_tenant[tenant] = left
            else:
                del self._per_tenant[tenant]
            self._total -= 1
            self._gauge(tenant, -1)
            took = self.clock() - started
            typical = self._typical_s
            self._typical_s = took if typical is None else typical + _EWMA_WEIGHT * (took - typical)

    def _refuse(self, tenant: str, limit: str, value: int) -> None:
        self.rejected += 1
        if self.metrics is not None:
            self.metrics.admission_rejected.labels(tenant, limit).inc()
        raise Overloaded(limit, value, self.retry_after_s(), tenant=tenant)

    def _gauge(self, tenant: str, change: int) -> None:
        if self.metrics is not None:
            self.metrics.child(self.metrics.requests_inflight, tenant).inc(change)
