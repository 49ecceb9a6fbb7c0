"""The core use case, framework-free: fan out to a panel, fuse, route, store; and the
composition root of the slices around it.

:class:`Gateway` is built by the app's lifespan from settings, an open storage and started
panels, and is usable without HTTP (tests, benchmarks, other front ends). It builds each
other slice's service once, sharing storage, clock, metrics and the state cache among them:
labels (``labels``: :mod:`judgefuse.service.review.labels`), verdict reads (``verdicts``), the
review queue (``review_queue``), learning (``learning``: tuning, refit, cold start and their
schedulers), calibration estimates (``calibration``) and monitoring (``monitoring``). Routes
reach those through their own slice's ``deps.py`` (``judging/deps.py``, ``review/deps.py``, ...);
the services read serving state through :mod:`judgefuse.service.kernel.serving`, never by
importing this module.

The judging path (admit, check once, votes, decide, route, stamp, store, observe) is the judging
slice's service, :class:`~judgefuse.service.judging.pipeline.JudgePipeline` (``judging``): its
module says which fusion method decides a verdict and where the votes come from (the panel's
fan-out, or the request's own for ``fuse``), :mod:`judgefuse.service.judging.routing` which
route it takes (docs/design.md, 'Routing and threshold tuning'). The routes call it
directly (``gateway.judging.judge`` and ``.batch``); the gateway only builds it.

Thresholds and models are cached per (tenant, panel) for ``state_ttl_s``
(:mod:`judgefuse.service.learning.state_cache`). Cascade panels walk their cascade instead of the whole
panel and route their own verdicts (:mod:`judgefuse.service.judging.cascade_serving`).

Cost: a verdict's ``cost`` (calls, tokens, USD) is the sum over its votes; /metrics and the
dashboard carry the same per judge and per panel (:mod:`judgefuse.service.kernel.metrics`).
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Any

from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.judging.pipeline import JudgePipeline
from judgefuse.service.judging.routing import route_verdict
from judgefuse.service.kernel.accounts import AnnotatorAccounts
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.panels import PanelRuntime, find_runtime
from judgefuse.service.learning.service import LearningService
from judgefuse.service.learning.state_cache import StateCache
from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.review.audit_plan import AuditPlanner
from judgefuse.service.review.labels import LabelService
from judgefuse.service.review.queue import ReviewQueue
from judgefuse.service.review.verdicts import VerdictReads
from judgefuse.service.settings import Settings
from judgefuse.service.storage import (
    ModelRecord,
    Storage,
    ThresholdRecord,
)

__all__ = ["Gateway", "PanelRuntime", "route_verdict"]

log = logging.getLogger("judgefuse.service")


class Gateway:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        panels: dict[str, PanelRuntime],
        metrics: ServiceMetrics | None = None,
        *,
        clock: Callable[[], float] = time.time,
        rng: random.Random | None = None,
    ) -> None:
        if not panels:
            raise ValueError("a gateway needs at least one panel")
        self.settings = settings
        self.storage = storage
        self.panels = panels
        self.metrics = metrics or ServiceMetrics()
        self.clock = clock
        self.rng = rng or random.Random(settings.review.review_seed)
        """The review loop's draws (audit, queue rank); seeded by ``settings.review.review_seed``."""
        self.default_panel = settings.judging.default_panel or next(iter(panels))
        if self.default_panel not in panels:
            raise ValueError(
                f"default_panel {self.default_panel!r} is not one of the panels: {', '.join(panels)}"
            )
        self.state = StateCache(settings, storage)
        self.replica_id = uuid.uuid4().hex
        """This gateway's name in cluster-wide leases (one refit at a time across replicas)."""
        self.audit_planner = AuditPlanner(settings, storage)
        """The audit rate of new verdicts (a panel's ``label_budget_per_day``)."""
        # ---- the other slices' services (routes reach them through each slice's deps.py); the
        # gateway hands itself to those that read serving state (judgefuse.service.kernel.serving)
        self.monitoring = MonitorService(settings, storage, clock=clock)
        self.monitors = self.monitoring.monitors
        """Precision monitors per threshold version, judge drift (:mod:`judgefuse.service.monitoring.monitor`)."""
        self.learning = LearningService(settings, storage, self, self.state, self.metrics,
                                        owner=self.replica_id, clock=clock)
        self.scheduler = self.learning.refit_scheduler
        """Background refits every ``refit_every_labels`` labels of a panel."""
        self.cold_start = self.learning.cold_start_scheduler
        """Label-free cold-start fits every N verdicts of a panel (:mod:`judgefuse.service.learning.cold_start`)."""
        self.labels = LabelService(storage, self.metrics, panels, self.monitors,
                                   self.learning.note_label)
        self.verdicts = VerdictReads(storage, storage, panels)
        self.review_queue = ReviewQueue(settings, storage, self, self.audit_planner, clock)
        self.annotators = AnnotatorAccounts(storage, clock)
        """Annotator credentials and review sessions (:mod:`judgefuse.service.kernel.accounts`)."""
        self.calibration = CalibrationService(settings, storage, clock=clock, metrics=self.metrics)
        self.panel_structure = self.calibration.panel_structure
        """``GET /v1/calibration``'s panel_structure, per panel, for ``panel_structure_ttl_s``."""
        self.judging = JudgePipeline(
            settings, storage, panels, self.default_panel, state=self.state,
            monitors=self.monitors, metrics=self.metrics, audit_planner=self.audit_planner,
            labels=self.labels, verdicts=self.verdicts, note_verdict=self.cold_start.note,
            rng=self.rng, clock=clock,
        )
        """The judging slice's service: /v1/judge, /v1/fuse and their batches
        (:mod:`judgefuse.service.judging.pipeline`)."""

    # ------------------------------------------------------------------ panels and state
    def runtime(self, name: str | None, *, field: str = "body.panel") -> PanelRuntime:
        return find_runtime(self.panels, name or self.default_panel, field=field)

    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None:
        return await self.state.threshold(tenant, panel)

    async def model(self, tenant: str, panel: str) -> tuple[ModelRecord, Any] | None:
        """The promoted learned model of (tenant, panel), restored, or None."""
        return await self.state.model(tenant, panel)

    async def active_method(self, tenant: str, runtime: PanelRuntime) -> tuple[str, str | None]:
        """(method name, model version) new verdicts of (tenant, panel) get by default."""
        return await self.judging.active_method(tenant, runtime)

    async def aclose(self) -> None:
        await self.monitoring.aclose()
        await self.learning.aclose()
