"""The monitoring slice's service: the precision monitors and judge drift of one gateway, and
their reads (``GET /v1/monitor``, ``POST /v1/monitor/clear``, the ``/metrics`` gauges, the
dashboard).

:attr:`MonitorService.monitors` is the one :class:`~judgefuse.service.monitoring.monitor.Monitors`
of the gateway: judging feeds it votes and asks it for alarms, review feeds it audit labels,
and the reads here report it. A read is always of the panel's current threshold version (the
latest stored, not the cached one routing uses), since that is the version an operator acts on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from judgefuse.service.errors import FieldProblem
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.monitoring.monitor import Monitors
from judgefuse.service.schemas import MonitorClearOut, MonitorEventOut, MonitorOut
from judgefuse.service.settings import Settings
from judgefuse.service.storage import Storage, ThresholdRecord

__all__ = ["EVENTS_SHOWN", "MonitorService"]

EVENTS_SHOWN = 50
"""The newest monitor events ``GET /v1/monitor`` shows."""


class MonitorService:
    def __init__(
        self, settings: Settings, storage: Storage, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.storage = storage
        self.monitors = Monitors(settings, storage, storage, storage, clock=clock)
        """Precision monitors per threshold version, judge drift (:mod:`judgefuse.service.monitoring.monitor`)."""
        self._reconcile: asyncio.Task[None] | None = None

    def start(self, tenants: Sequence[str], panels: Mapping[str, PanelRuntime]) -> None:
        """In the background: every panel's current monitor checked against the stored audit
        labels and rebuilt if behind (a replica killed between a label and its monitor write)."""
        on_drift = {name: runtime.panel.config.on_drift for name, runtime in panels.items()}
        self._reconcile = asyncio.get_running_loop().create_task(
            self.monitors.reconcile_all(list(tenants), on_drift))

    async def aclose(self) -> None:
        if self._reconcile is not None and not self._reconcile.done():
            self._reconcile.cancel()
            await asyncio.gather(self._reconcile, return_exceptions=True)
        await self.monitors.aclose()

    async def report(self, tenant: str, runtime: PanelRuntime) -> MonitorOut:
        """The monitor of the panel's current threshold version, judge drift and the newest
        events."""
        threshold = await self.storage.get_threshold(tenant, runtime.name)
        snap = await self.monitors.snapshot(tenant, runtime.name, threshold)
        events = await self.storage.monitor_events(tenant, runtime.name, limit=EVENTS_SHOWN)
        return MonitorOut(
            panel=runtime.name, on_drift=runtime.panel.config.on_drift,
            events=[MonitorEventOut(**e.model_dump(exclude={"panel"})) for e in events],
            **{k: v for k, v in snap.items() if k != "alarm"},
        )

    async def snapshot(self, tenant: str, panel: str, threshold: ThresholdRecord | None, *,
                       max_age_s: float = 0.0) -> dict[str, Any]:
        """The monitor of ``threshold``'s version (the one the caller shows beside it); a
        judge's vote-drift report may be up to ``max_age_s`` old."""
        return await self.monitors.snapshot(tenant, panel, threshold, max_age_s=max_age_s)

    async def current_snapshot(self, tenant: str, panel: str, *, max_age_s: float = 0.0) -> dict[str, Any]:
        """The monitor of the panel's current (latest stored) threshold version."""
        return await self.snapshot(tenant, panel, await self.storage.get_threshold(tenant, panel),
                                   max_age_s=max_age_s)

    async def clear(self, tenant: str, runtime: PanelRuntime) -> MonitorClearOut:
        """End the alarm of the panel's current threshold version and restart its monitor (the
        evidence is kept in a ``clear`` event). Not in alarm: nothing is written."""
        threshold = await self.storage.get_threshold(tenant, runtime.name)
        if threshold is None:
            raise FieldProblem("body.panel", f"panel {runtime.name!r} has no threshold tuned: "
                                             "no monitor to clear")
        event = await self.monitors.clear(tenant, runtime.name, threshold)
        return MonitorClearOut(
            panel=runtime.name, threshold_version=threshold.version, cleared=event is not None,
            event=None if event is None else MonitorEventOut(**event.model_dump(exclude={"panel"})),
        )
