"""The core use case, framework-free: fan out to a panel, fuse, route, store; and the
composition root of the slices around it.

:class:`Gateway` is built by the app's lifespan from settings, an open storage and started
panels, and is usable without HTTP (tests, benchmarks, other front ends). It builds each
other slice's service once, sharing storage, clock, metrics and the state cache among them:
labels (``labels``: :mod:`judgefuse.service.review.labels`), verdict reads (``verdicts``), the
review queue (``review_queue``), learning (``learning``: tuning, refit, cold start and their
schedulers), calibration estimates (``calibration``) and monitoring (``monitoring``). Routes
reach those through :mod:`judgefuse.service.web.deps`; the services read serving state through
:mod:`judgefuse.service.serving`, never by importing this module.

Which fusion method decides a verdict (stamped on it as ``method`` + ``model_version``):

1. the request's ``method`` when given (a learned method needs a promoted model of it);
2. else the promoted learned model of (tenant, panel) when there is one (fitted from labels, or a
   label-free cold-start fit of the panel's ``fusion: dawid_skene``: :mod:`.cold_start`);
3. else ``settings.fusion_method`` or the panel file's ``fusion``.

Routing (docs/design.md, 'Routing and threshold tuning'): ``auto_accept`` iff the latest threshold of (tenant, panel)
applies to the verdict and ``confidence >= threshold``. A threshold applies when it was tuned
for the verdict's method (and, for a learned method, the same model version). Otherwise, with
no threshold tuned, or a "review everything" record, the verdict goes to ``human_review`` and
``threshold.reason`` says why.

Votes come from the panel's fan-out (``judge``) or from the request (``fuse``: bring your own
votes, :mod:`judgefuse.service.judging.posted_votes`); that is the only difference: both then take the
one path in ``_serve`` (quorum, fuse, route, stamp, store). The stamp is the verdict's review
stratum, drawn at decision time (:mod:`judgefuse.service.review.sampling`): routed to review,
or auto-accepted and drawn for audit with the panel's ``audit_rate``, or not; it is stored with
the verdict (with the threshold version that routed it), enqueues it for review when it says
so, and adds the verdict to its stratum's traffic counter, all in the one ``save_verdict``.

Thresholds and models are cached per (tenant, panel) for ``state_ttl_s``
(:mod:`judgefuse.service.learning.state_cache`). Cascade panels walk their cascade instead of the whole
panel and route their own verdicts (:mod:`judgefuse.service.judging.cascade_serving`).

Cost: a verdict's ``cost`` (calls, tokens, USD) is the sum over its votes; /metrics and the
dashboard carry the same per judge and per panel (:mod:`judgefuse.service.monitoring.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from judgefuse.fusion.capabilities import LEARNED_METHOD, ItemFusionMethod
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.service.errors import Conflict, FieldProblem, QuorumLost, ServiceError, TooLarge
from judgefuse.service.estimates.service import CalibrationService
from judgefuse.service.judging.admission import Admission
from judgefuse.service.judging.cascade_serving import (
    live_cascade_out,
    walk_cascade,
)
from judgefuse.service.judging.panels import PanelRuntime, find_runtime
from judgefuse.service.judging.request_checks import CheckedRequest, RequestChecks
from judgefuse.service.judging.routing import Router, route_verdict
from judgefuse.service.judging.single_flight import SingleFlight, join_or_judge
from judgefuse.service.judging.verdict_ids import VerdictIds
from judgefuse.service.learning.service import LearningService
from judgefuse.service.learning.state_cache import StateCache
from judgefuse.service.ledger import (
    traffic_increments,
)
from judgefuse.service.monitoring.metrics import ServiceMetrics
from judgefuse.service.monitoring.service import MonitorService
from judgefuse.service.review.audit_plan import AuditPlanner
from judgefuse.service.review.labels import LabelService
from judgefuse.service.review.labels import label_result as _label_result
from judgefuse.service.review.queue import ReviewQueue
from judgefuse.service.review.sampling import stamp_review
from judgefuse.service.review.verdicts import VerdictReads, review_out
from judgefuse.service.schemas import (
    BatchResponse,
    BatchResult,
    CascadeOut,
    CostOut,
    FuseRequest,
    InvalidItem,
    JudgeRequest,
    VerdictOut,
)
from judgefuse.service.settings import Settings
from judgefuse.service.storage import (
    LabelOutcome,
    ModelRecord,
    Storage,
    StorageError,
    StorageUnavailable,
    ThresholdRecord,
    VerdictExists,
    VerdictRecord,
)

if TYPE_CHECKING:
    pass

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
        self.rng = rng or random.Random(settings.review_seed)
        """The review loop's draws (audit, queue rank); seeded by ``settings.review_seed``."""
        self.default_panel = settings.default_panel or next(iter(panels))
        if self.default_panel not in panels:
            raise ValueError(
                f"default_panel {self.default_panel!r} is not one of the panels: {', '.join(panels)}"
            )
        self.state = StateCache(settings, storage)
        self.admission = Admission.from_settings(settings, self.metrics)
        self.checks = RequestChecks(settings, panels, self.default_panel)
        """What a request passes once, before any judge call (:mod:`judgefuse.service.judging.request_checks`)."""
        self.verdict_ids = VerdictIds()
        """Ids of new verdicts (uuid4-shaped, drawn in batches: :mod:`judgefuse.service.judging.verdict_ids`)."""
        self.replica_id = uuid.uuid4().hex
        """This gateway's name in cluster-wide leases (one refit at a time across replicas)."""
        self.single_flight: SingleFlight[VerdictOut] = SingleFlight(
            storage, ttl_s=settings.single_flight_claim_s)
        self.monitoring = MonitorService(settings, storage, clock=clock)
        self.monitors = self.monitoring.monitors
        """Precision monitors per threshold version, judge drift (:mod:`judgefuse.service.monitoring.monitor`)."""
        self.router = Router(self.state, self.monitors)
        """Which threshold and which route a new verdict takes (:mod:`judgefuse.service.judging.routing`)."""
        self.audit_planner = AuditPlanner(settings, storage)
        """The audit rate of new verdicts (a panel's ``label_budget_per_day``)."""
        # ---- the other slices' services (routes reach them through web/deps.py); the
        # gateway hands itself to those that read serving state (judgefuse.service.serving)
        self.learning = LearningService(settings, storage, self, self.state, self.metrics,
                                        owner=self.replica_id, clock=clock)
        self.scheduler = self.learning.refit_scheduler
        """Background refits every ``refit_every_labels`` labels of a panel."""
        self.cold_start = self.learning.cold_start_scheduler
        """Label-free cold-start fits every N verdicts of a panel (:mod:`judgefuse.service.learning.cold_start`)."""
        self.labels = LabelService(storage, self.metrics, panels, self.monitors,
                                   self.learning.note_label)
        self.verdicts = VerdictReads(storage, panels)
        self.review_queue = ReviewQueue(settings, storage, self, self.audit_planner, clock)
        self.calibration = CalibrationService(settings, storage, clock=clock)
        self.panel_structure = self.calibration.panel_structure
        """``GET /v1/calibration``'s panel_structure, per panel, for ``panel_structure_ttl_s``."""

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
        if runtime.cascade is not None:
            return "cascade", None
        model = await self.model(tenant, runtime.name)
        if model is not None:
            return model[0].method or LEARNED_METHOD, model[1].model_version
        return runtime.default_method, None

    # ------------------------------------------------------------------ judging
    async def _fuse(
        self, tenant: str, runtime: PanelRuntime, request: JudgeRequest, item: PairwiseItem,
        votes: list[JudgeVote],
    ) -> Verdict:
        name = request.method
        if name is None or runtime.is_learned(name):
            model = await self.model(tenant, runtime.name)
            if model is not None and (name is None or (model[0].method or LEARNED_METHOD) == name):
                return model[1](votes)
            if name is not None:
                raise FieldProblem(
                    "body.method",
                    f"no {name} model promoted for panel {runtime.name!r} yet "
                    "(POST /v1/fusion/refit once there are enough labels)",
                )
            name = runtime.default_method
        method = runtime.method(name)
        if runtime.is_item_method(name, method):
            return await cast(ItemFusionMethod, method).afuse(item, votes, tenant=tenant)
        return method(votes)

    async def judge(self, tenant: str, request: JudgeRequest, *, prefix: str = "body") -> VerdictOut:
        """One verdict: fan-out, quorum, fuse, route, stamp, store (and the inline label)."""
        with self.admission.admit(tenant):
            return await self._admitted(tenant, self.checks.item(request, prefix))

    async def fuse(self, tenant: str, request: FuseRequest, *, prefix: str = "body") -> VerdictOut:
        """One verdict from votes cast elsewhere: the same path as :meth:`judge` but for where
        the votes come from (checked against the panel before anything is stored)."""
        with self.admission.admit(tenant):
            return await self._admitted(tenant, self.checks.item(request, prefix))

    async def _admitted(self, tenant: str, checked: CheckedRequest) -> VerdictOut:
        """An admitted, checked request: one with an ``id`` already in flight joins it
        (single_flight); else :meth:`_serve`."""
        return await join_or_judge(self.single_flight, tenant, checked, self._serve)

    async def _serve(self, tenant: str, checked: CheckedRequest) -> VerdictOut:
        """The one decide-route-stamp-store path; posted votes replace the panel's fan-out."""
        started = time.perf_counter()
        request, runtime, prefix, posted = checked.request, checked.runtime, checked.prefix, checked.posted
        verdict_id = request.id or self.verdict_ids.new()
        if request.id is not None:
            existing = await self.storage.get_verdict(tenant, request.id)
            if existing is not None:
                return await self._replay(tenant, existing, request, runtime.name, prefix)
        item = PairwiseItem(
            id=verdict_id, question=request.question, answer_a=request.answer_a,
            answer_b=request.answer_b, category=request.category, metadata=request.metadata,
        )
        cascade_out: CascadeOut | None = None
        cascade_stage: str | None = None
        if posted is None and runtime.cascade is not None and request.method is None:
            decision, slowest = await walk_cascade(runtime, item, tenant=tenant)
            votes = list(decision.verdict.votes)
            judged = fused = time.perf_counter()
            if not any(v.valid for v in votes):
                self.metrics.quorum_lost.labels(runtime.name).inc()
                self.metrics.observe_votes(runtime.name, votes, tenant=tenant)
                raise QuorumLost(runtime.name, votes, 1)
            verdict = decision.verdict
            route, used = await self.router.route(tenant, runtime, verdict, cascade=decision)
            cascade_out, cascade_stage = live_cascade_out(runtime, decision)
        else:
            # the only difference between /v1/judge and /v1/fuse: where the votes come from
            votes = await runtime.panel.judge(item, tenant=tenant) if posted is None else posted
            judged = time.perf_counter()
            if not runtime.panel.quorum_met(votes):
                quorum = runtime.panel.config.quorum_count()
                if posted is not None:
                    valid = sum(1 for v in votes if v.valid)
                    raise FieldProblem(f"{prefix}.votes", f"{valid} valid vote(s); the panel's "
                                                          f"quorum is {quorum}")
                self.metrics.quorum_lost.labels(runtime.name).inc()
                self.metrics.observe_votes(runtime.name, votes, tenant=tenant)
                raise QuorumLost(runtime.name, votes, quorum)
            verdict = await self._fuse(tenant, runtime, request, item, votes)
            fused = time.perf_counter()
            route, used = await self.router.route(tenant, runtime, verdict)
            slowest = max((v.latency_s for v in votes), default=0.0)
        created_at = self.clock()
        verdict = verdict.model_copy(update={
            "id": verdict_id, "route": route, "threshold": used.value,
            "degraded": any(not v.valid for v in votes),
            "timings": {**verdict.timings, "judges_s": judged - started, "fuse_s": fused - judged,
                        "slowest_judge_s": slowest},
        })
        planned = await self.audit_planner.rate(tenant, runtime.name, runtime.panel.config,
                                                created_at)
        stamp = stamp_review(route, used.code, planned.audit_rate, self.rng,
                             inline_label=request.label is not None)
        record = VerdictRecord(
            id=verdict_id, tenant=tenant, panel=runtime.name, created_at=created_at,
            verdict=verdict, item=item if self.settings.store_items else None,
            review=stamp, threshold_version=used.version,
        )
        storing = time.perf_counter()
        try:
            await self.storage.save_verdict(
                tenant, record, traffic_increments(runtime.name, verdict.method, stamp)
            )
        except VerdictExists:
            raise Conflict(f"verdict id {verdict_id!r} is already used",
                           fields=[(f"{prefix}.id", "already used")]) from None
        if runtime.cold_start is not None:
            self.cold_start.note(tenant, runtime.name)
        feedback = None
        label = labelled_at = None
        if request.label is not None:
            outcome = await self._label(tenant, verdict_id, request.label)
            feedback = _label_result(outcome)
            label, labelled_at = outcome.record.label, outcome.record.labelled_at
        total = time.perf_counter() - started
        verdict.timings["store_s"] = time.perf_counter() - storing
        verdict.timings["total_s"] = total
        verdict.timings["overhead_s"] = max(0.0, total - slowest)
        self.metrics.observe_votes(runtime.name, votes, tenant=tenant)
        self.monitors.observe_votes(tenant, runtime.name, votes)
        self.metrics.observe_verdict(tenant, runtime.name, verdict, cascade_stage)
        self.metrics.overhead.observe(verdict.timings["overhead_s"])
        return VerdictOut.of(
            verdict, panel=runtime.name, threshold=used, created_at=created_at, label=label,
            labelled_at=labelled_at, feedback=feedback, category=request.category,
            cascade=cascade_out, review=review_out(record),
        )

    async def _replay(
        self, tenant: str, existing: VerdictRecord, request: JudgeRequest, panel: str, prefix: str
    ) -> VerdictOut:
        """A client retrying a request whose verdict was stored but not acknowledged (a timeout,
        a crash between the save and the reply) gets the stored verdict, with its inline label
        applied (idempotently), and no judge is called twice. The same id for a different
        item, panel, or an item not stored (``store_items=False``) is a 409."""
        item = existing.item
        same = (
            item is not None
            and existing.panel == panel
            and (item.question, item.answer_a, item.answer_b)
            == (request.question, request.answer_a, request.answer_b)
        )
        if not same:
            raise Conflict(f"verdict id {existing.id!r} is already used", fields=[(f"{prefix}.id", "already used")])
        if request.label is not None:
            await self._label(tenant, existing.id, request.label)
        return await self.get_verdict(tenant, existing.id)

    async def judge_batch(
        self, tenant: str, requests: Sequence[JudgeRequest | InvalidItem]
    ) -> BatchResponse:
        """Each item answers for itself: a malformed item is its own 4xx in ``results`` (found
        before any judge call, see :meth:`RequestChecks.batch`); only a batch over the size
        limit is refused whole."""
        return await self._batch(tenant, requests)

    async def fuse_batch(self, tenant: str, requests: Sequence[FuseRequest]) -> BatchResponse:
        """As :meth:`judge_batch`; an item voting for a judge its panel does not have is that
        item's 422 (its votes are checked with the item, before anything is judged)."""
        return await self._batch(tenant, requests)

    async def _batch(
        self, tenant: str, requests: Sequence[JudgeRequest | InvalidItem]
    ) -> BatchResponse:
        limit = self.settings.max_batch_items
        if len(requests) > limit:
            raise TooLarge(
                f"batch of {len(requests)} items; at most {limit} per request",
                fields=[("body.items", f"at most {limit} items")],
            )
        checked = self.checks.batch(requests)

        async def one(i: int, item: CheckedRequest | ServiceError) -> BatchResult:
            try:
                if isinstance(item, ServiceError):
                    raise item
                with self.admission.admit(tenant):
                    verdict = await self._admitted(tenant, item)
                return BatchResult(index=i, status=200, verdict=verdict)
            except ServiceError as exc:
                return BatchResult(index=i, status=exc.status, error=exc.body())
            except StorageError as exc:  # this item's verdict, not the batch, failed to store
                log.error("batch item %d: storage error: %s", i, type(exc).__name__)
                status = 503 if isinstance(exc, StorageUnavailable) else 500
                return BatchResult(index=i, status=status, error={"error": "storage error"})

        results = await asyncio.gather(*(one(i, item) for i, item in enumerate(checked)))
        n_ok = sum(1 for r in results if r.status == 200)
        cost = CostOut.total(r.verdict.cost for r in results if r.verdict is not None)
        return BatchResponse(results=list(results), n_ok=n_ok, n_failed=len(results) - n_ok,
                             cost=cost)

    async def get_verdict(self, tenant: str, verdict_id: str) -> VerdictOut:
        """A stored verdict read back (:class:`~judgefuse.service.review.verdicts.VerdictReads`)."""
        return await self.verdicts.get(tenant, verdict_id)

    async def _label(self, tenant: str, verdict_id: str, label: Letter) -> LabelOutcome:
        """A request's inline label (:class:`~judgefuse.service.review.labels.LabelService`)."""
        return await self.labels.label(tenant, verdict_id, label)

    async def aclose(self) -> None:
        await self.learning.aclose()
