"""The path of ``POST /v1/judge`` and ``POST /v1/fuse``, one named step after another.

:class:`JudgePipeline` read top to bottom is the path of one request:

1. **admit** (:meth:`~JudgePipeline.admit`): an in-flight place for the tenant, or a 429 before
   any judge is called (:mod:`judgefuse.service.judging.admission`);
2. **check** (:meth:`~JudgePipeline.check`): limits, panel, method and posted votes, once
   (:mod:`judgefuse.service.judging.request_checks`); what passes is a
   :class:`~judgefuse.service.judging.request_checks.CheckedRequest`, never checked again;
3. **flight** (:meth:`~JudgePipeline.flight`): a request whose ``id`` is in flight joins it
   (:mod:`judgefuse.service.judging.single_flight`); one whose ``id`` is stored is replayed
   (:meth:`~JudgePipeline.replay`); any other is served (:meth:`~JudgePipeline.serve`, steps 4-8);
4. **votes** (:meth:`~JudgePipeline.votes`): the request's own votes (``/v1/fuse``, the only
   difference from ``/v1/judge``), the cascade's walk, or the panel's fan-out;
5. **decide** (:meth:`~JudgePipeline.decide`): quorum, then the method that decides fuses;
6. **route** (:meth:`~JudgePipeline.route`): :class:`~judgefuse.service.judging.routing.Router`
   (the threshold that applies, the route, the drift override; a cascade routes itself);
7. **stamp** (:meth:`~JudgePipeline.stamp`): the verdict's review stratum, drawn at decision
   time (:mod:`judgefuse.service.review.sampling`): routed to review, or auto-accepted and drawn
   for audit with the panel's ``audit_rate``, or not;
8. **store** (:meth:`~JudgePipeline.store`): one ``save_verdict`` holds the verdict, its stamp
   and the threshold version that routed it, enqueues it for review when the stamp says so and
   adds it to its stratum's traffic counter; then the request's inline label, if any;
9. **observe** (:meth:`~JudgePipeline.observe`): metrics and the judges' drift monitors.

A batch (:meth:`~JudgePipeline.batch`) checks every item first (step 2 for each, and repeated
ids), then takes each good item through the other steps on its own: a bad item is its own 4xx
in ``results``, an item over an admission limit its own 429.

Which fusion method decides a verdict (stamped on it as ``method`` + ``model_version``):

1. the request's ``method`` when given (a learned method needs a promoted model of it);
2. else the promoted learned model of (tenant, panel) when there is one (fitted from labels, or a
   label-free cold-start fit of the panel's ``fusion: dawid_skene``:
   :mod:`judgefuse.service.learning.cold_start`);
3. else ``settings.judging.fusion_method`` or the panel file's ``fusion``.

Cascade panels walk their cascade instead of the whole panel, unless the request names a
method (:mod:`judgefuse.service.judging.cascade_serving`). Cost: a verdict's ``cost`` (calls,
tokens, USD) is the sum over its votes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NoReturn, Protocol, cast

from judgefuse.fusion.capabilities import LEARNED_METHOD, ItemFusionMethod
from judgefuse.fusion.cascade import CascadeDecision
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.service.errors import Conflict, FieldProblem, QuorumLost, ServiceError, TooLarge
from judgefuse.service.judging.admission import Admission
from judgefuse.service.judging.cascade_serving import live_cascade_out, walk_cascade
from judgefuse.service.judging.posted_votes import same_votes
from judgefuse.service.judging.request_checks import CheckedRequest, RequestChecks
from judgefuse.service.judging.routing import Router, RoutingState
from judgefuse.service.judging.single_flight import SingleFlight, join_or_judge
from judgefuse.service.judging.telemetry import telemetry_from_environ
from judgefuse.service.judging.verdict_ids import VerdictIds
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.sojourn import Working
from judgefuse.service.kernel.verdict_out import verdict_out
from judgefuse.service.ledger import traffic_increments
from judgefuse.service.monitoring.monitor import Monitors
from judgefuse.service.review.active_audits import ActiveAudits
from judgefuse.service.review.audit_plan import AuditPlanner
from judgefuse.service.review.labels import label_result
from judgefuse.service.review.sampling import stamp_review
from judgefuse.service.review.verdicts import review_out
from judgefuse.service.schemas import (
    BatchResponse,
    BatchResult,
    CostOut,
    InvalidItem,
    JudgeRequest,
    ThresholdUsed,
    VerdictOut,
)
from judgefuse.service.settings import Settings
from judgefuse.service.storage import (
    LabelOutcome,
    ReviewStamp,
    Storage,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictRecord,
)

__all__ = ["Ballot", "JudgePipeline"]

log = logging.getLogger("judgefuse.service")


class Labels(Protocol):
    """The label path (:class:`~judgefuse.service.review.labels.LabelService`)."""

    async def label(self, tenant: str, verdict_id: str, label: Letter) -> LabelOutcome: ...


class StoredVerdicts(Protocol):
    """Stored verdicts read back (:class:`~judgefuse.service.review.verdicts.VerdictReads`)."""

    async def get(self, tenant: str, verdict_id: str) -> VerdictOut: ...


@dataclass(frozen=True, slots=True)
class Ballot:
    """The votes one item drew (step 4)."""

    votes: list[JudgeVote]
    slowest_s: float
    """The judges' share of the wall time: the slowest vote (a cascade: summed over its stages)."""
    cascade: CascadeDecision | None = None
    """The cascade's walk when it drew the votes (it decided as it went)."""


class JudgePipeline:
    """The judging slice's service: ``/v1/judge``, ``/v1/fuse`` and their batches (module
    docstring). Built once by the gateway, which hands it the state, monitors, audit planner,
    label path and verdict reads the other slices own."""

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        panels: Mapping[str, PanelRuntime],
        default_panel: str,
        *,
        state: RoutingState,
        monitors: Monitors,
        metrics: ServiceMetrics,
        audit_planner: AuditPlanner,
        labels: Labels,
        verdicts: StoredVerdicts,
        note_verdict: Callable[[str, str], None],
        rng: random.Random,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.state = state
        self.monitors = monitors
        self.metrics = metrics
        self.audit_planner = audit_planner
        """The audit rate of new verdicts (a panel's ``label_budget_per_day``)."""
        self.active_audits = ActiveAudits(settings, storage)
        """The confidence bands of a panel with ``audit_sampling: active``."""
        self.labels = labels
        self.verdicts = verdicts
        self.note_verdict = note_verdict
        """Called with (tenant, panel) for each verdict stored for a panel with a cold-start
        method (the cold start's rounds: :mod:`judgefuse.service.learning.cold_start`)."""
        self.rng = rng
        """The review loop's draws (audit, queue rank)."""
        self.clock = clock
        self.admission = Admission.from_settings(settings, metrics)
        self.checks = RequestChecks(settings, panels, default_panel)
        self.single_flight: SingleFlight[VerdictOut] = SingleFlight(
            storage, ttl_s=settings.judging.single_flight_claim_s)
        self.verdict_ids = VerdictIds()
        """Ids of new verdicts (uuid4-shaped, drawn in batches: :mod:`judgefuse.service.judging.verdict_ids`)."""
        self.router = Router(state, monitors)
        self.telemetry = telemetry_from_environ(os.environ)
        """OpenTelemetry spans and evaluation events, when ``OTEL_*`` asks (else None:
        :mod:`judgefuse.service.judging.telemetry`)."""

    # ------------------------------------------------------------------ entry points
    async def judge(self, tenant: str, request: JudgeRequest, *, prefix: str = "body") -> VerdictOut:
        """One verdict; a :class:`~judgefuse.service.schemas.FuseRequest` brings its own votes."""
        with self.admit(tenant):
            checked = self.check(request, prefix)
            return await self.flight(tenant, checked)

    async def batch(self, tenant: str, requests: Sequence[JudgeRequest | InvalidItem]) -> BatchResponse:
        """Each item answers for itself (its own status in ``results``); only a batch over the
        size limit is refused whole."""
        limit = self.settings.judging.max_batch_items
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
                with self.admit(tenant):
                    verdict = await self.flight(tenant, item)
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

    # ------------------------------------------------------------------ 1. admit
    def admit(self, tenant: str) -> AbstractContextManager[None]:
        """Hold an in-flight place for ``tenant`` until the answer (429 over a limit)."""
        return self.admission.admit(tenant)

    # ------------------------------------------------------------------ 2. check
    def check(self, request: JudgeRequest, prefix: str = "body") -> CheckedRequest:
        """Limits, panel, method, posted votes: a 422 naming the field under ``prefix``."""
        return self.checks.item(request, prefix)

    # ------------------------------------------------------------------ 3. one flight per id
    async def flight(self, tenant: str, checked: CheckedRequest) -> VerdictOut:
        """A request without an ``id`` is served; one with an ``id`` joins the request in
        flight with it, or leads (:meth:`serve`)."""
        if checked.request.id is None:
            return await self.serve(tenant, checked)
        return await join_or_judge(self.single_flight, tenant, checked, self.serve)

    async def serve(self, tenant: str, checked: CheckedRequest) -> VerdictOut:
        """Steps 4 to 9 for one checked request; a stored ``id`` is replayed instead."""
        started = time.perf_counter()
        request, runtime = checked.request, checked.runtime
        if request.id is not None:
            existing = await self.storage.get_verdict(tenant, request.id)
            if existing is not None:
                return await self.replay(tenant, existing, checked)
        verdict_id = request.id or self.verdict_ids.new()
        item = PairwiseItem(
            id=verdict_id, question=request.question, answer_a=request.answer_a,
            answer_b=request.answer_b, category=request.category, metadata=request.metadata,
        )
        ballot = await self.votes(tenant, checked, item)
        judged = time.perf_counter()
        verdict = await self.decide(tenant, checked, item, ballot)
        fused = time.perf_counter()
        route, used = await self.route(tenant, runtime, verdict, ballot)
        created_at = self.clock()
        verdict = verdict.model_copy(update={
            "id": verdict_id, "route": route, "threshold": used.value,
            "degraded": any(v.failed for v in ballot.votes),
            "timings": {**verdict.timings, "judges_s": judged - started, "fuse_s": fused - judged,
                        "slowest_judge_s": ballot.slowest_s},
        })
        stamp = await self.stamp(tenant, runtime, route, used, created_at,
                                 inline_label=request.label is not None, confidence=verdict.confidence)
        storing = time.perf_counter()
        record = await self.store(tenant, checked, item, verdict, stamp, used, created_at)
        labelled = await self.label_inline(tenant, checked, verdict_id)
        total = time.perf_counter() - started
        verdict.timings["store_s"] = time.perf_counter() - storing
        verdict.timings["total_s"] = total
        verdict.timings["overhead_s"] = max(0.0, total - ballot.slowest_s)
        cascade_out, cascade_stage = (live_cascade_out(runtime, ballot.cascade)
                                      if ballot.cascade is not None else (None, None))
        self.observe(tenant, runtime, ballot, verdict, cascade_stage)
        if self.telemetry is not None:
            self.telemetry.verdict(tenant, runtime, ballot.votes, verdict, judged=checked.posted is None)
        return verdict_out(
            verdict, panel=runtime.name, threshold=used, created_at=created_at,
            label=labelled.record.label if labelled else None,
            labelled_at=labelled.record.labelled_at if labelled else None,
            feedback=label_result(labelled) if labelled else None, category=request.category,
            cascade=cascade_out, review=review_out(record),
        )

    async def replay(self, tenant: str, existing: VerdictRecord, checked: CheckedRequest) -> VerdictOut:
        """A client retrying a request whose verdict was stored but not acknowledged (a timeout,
        a crash between the save and the reply) gets the stored verdict, with its inline label
        applied (idempotently), and no judge is called twice. The same id for a different
        item, panel, or an item not stored (``store_items=False``) is a 409, and so is a
        ``/v1/fuse`` replay posting other votes than the stored verdict's."""
        request, item = checked.request, existing.item
        same = (
            item is not None
            and existing.panel == checked.runtime.name
            and (item.question, item.answer_a, item.answer_b)
            == (request.question, request.answer_a, request.answer_b)
        )
        if not same:
            raise Conflict(f"verdict id {existing.id!r} is already used",
                           fields=[(f"{checked.prefix}.id", "already used")])
        if checked.posted is not None and not same_votes(existing.verdict.votes, checked.posted):
            raise Conflict(f"verdict id {existing.id!r} is already used with other votes",
                           fields=[(f"{checked.prefix}.votes", "differ from the votes stored "
                                                              "under this id")])
        if request.label is not None:
            await self.labels.label(tenant, existing.id, request.label)
        return await self.verdicts.get(tenant, existing.id)

    # ------------------------------------------------------------------ 4. votes
    async def votes(self, tenant: str, checked: CheckedRequest, item: PairwiseItem) -> Ballot:
        """The request's own votes (checked already); else a cascade panel, asked for no
        particular method, walks its cascade; else every judge of the panel votes."""
        runtime = checked.runtime
        if checked.posted is not None:
            return Ballot(checked.posted, _slowest(checked.posted))
        with Working.away():  # waiting for judges is not the gateway's work (backpressure)
            if runtime.cascade is not None and checked.request.method is None:
                decision, waited = await walk_cascade(runtime, item, tenant=tenant)
                return Ballot(list(decision.verdict.votes), waited, decision)
            votes = await runtime.panel.judge(item, tenant=tenant)
        return Ballot(votes, _slowest(votes))

    # ------------------------------------------------------------------ 5. decide
    async def decide(
        self, tenant: str, checked: CheckedRequest, item: PairwiseItem, ballot: Ballot
    ) -> Verdict:
        """Quorum, then fusion. A cascade decided as it walked: it fails (503) only when no
        judge it consulted gave a usable vote. Posted votes short of the panel's quorum are the
        client's 422; the panel's judges short of it, a 503."""
        runtime, votes = checked.runtime, ballot.votes
        if ballot.cascade is not None:
            if not any(v.valid for v in votes):
                self._quorum_lost(tenant, runtime, votes, 1)
            return ballot.cascade.verdict
        if not runtime.panel.quorum_met(votes):
            quorum = runtime.panel.config.quorum_count()
            if checked.posted is not None:
                valid = sum(1 for v in votes if v.valid)
                raise FieldProblem(f"{checked.prefix}.votes", f"{valid} valid vote(s); the panel's "
                                                              f"quorum is {quorum}")
            self._quorum_lost(tenant, runtime, votes, quorum)
        return await self.fuse(tenant, runtime, checked.request.method, item, votes)

    async def fuse(
        self, tenant: str, runtime: PanelRuntime, name: str | None, item: PairwiseItem,
        votes: list[JudgeVote],
    ) -> Verdict:
        """The verdict of the method that decides (module docstring): ``name`` is the
        request's ``method``."""
        if name is None or runtime.is_learned(name):
            model = await self.state.model(tenant, runtime.name)
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
            with Working.away():  # a fuser model's call, like a judge's, is not the loop's work
                return await cast(ItemFusionMethod, method).afuse(item, votes, tenant=tenant)
        return method(votes)

    async def active_method(self, tenant: str, runtime: PanelRuntime) -> tuple[str, str | None]:
        """(method name, model version) new verdicts of (tenant, panel) get when the request
        names no method: its cascade, else its promoted model, else its configured method."""
        if runtime.cascade is not None:
            return "cascade", None
        model = await self.state.model(tenant, runtime.name)
        if model is not None:
            return model[0].method or LEARNED_METHOD, model[1].model_version
        return runtime.default_method, None

    def _quorum_lost(self, tenant: str, runtime: PanelRuntime, votes: list[JudgeVote],
                     quorum: int) -> NoReturn:
        self.metrics.quorum_lost.labels(runtime.name).inc()
        self.metrics.observe_votes(runtime.name, votes, tenant=tenant)
        raise QuorumLost(runtime.name, votes, quorum)

    # ------------------------------------------------------------------ 6. route
    async def route(
        self, tenant: str, runtime: PanelRuntime, verdict: Verdict, ballot: Ballot
    ) -> tuple[str, ThresholdUsed]:
        """(route, the threshold used and why) (:mod:`judgefuse.service.judging.routing`)."""
        return await self.router.route(tenant, runtime, verdict, cascade=ballot.cascade)

    # ------------------------------------------------------------------ 7. stamp
    async def stamp(
        self, tenant: str, runtime: PanelRuntime, route: str, used: ThresholdUsed,
        created_at: float, *, inline_label: bool, confidence: float | None = None,
    ) -> ReviewStamp:
        """The review stratum, drawn with the panel's audit rate in force at ``created_at``; with
        ``audit_sampling: active``, an auto-accepted verdict's at its ``confidence`` band's rate
        (:mod:`judgefuse.service.review.active_audits`)."""
        planned = await self.audit_planner.rate(tenant, runtime.name, runtime.panel.config,
                                                created_at)
        band = None
        if (route == "auto_accept" and not inline_label and confidence is not None
                and runtime.panel.config.audit_sampling == "active"):
            banded = await self.active_audits.bands(tenant, runtime.name, planned.audit_rate)
            if banded is not None:
                band = (banded.rate(confidence), banded.floor)
        return stamp_review(route, used.code, planned.audit_rate, self.rng,
                            inline_label=inline_label, band=band)

    # ------------------------------------------------------------------ 8. store
    async def store(
        self, tenant: str, checked: CheckedRequest, item: PairwiseItem, verdict: Verdict,
        stamp: ReviewStamp, used: ThresholdUsed, created_at: float,
    ) -> VerdictRecord:
        """One ``save_verdict`` (module docstring); an id stored meanwhile is a 409."""
        runtime, verdict_id = checked.runtime, item.id
        record = VerdictRecord(
            id=verdict_id, tenant=tenant, panel=runtime.name, created_at=created_at,
            verdict=verdict, item=item if self.settings.storage.store_items else None,
            review=stamp, threshold_version=used.version,
        )
        try:
            await self.storage.save_verdict(
                tenant, record, traffic_increments(
                    runtime.name, verdict.method, stamp,
                    None if verdict.choice is None else verdict.confidence)
            )
        except VerdictExists:
            raise Conflict(f"verdict id {verdict_id!r} is already used",
                           fields=[(f"{checked.prefix}.id", "already used")]) from None
        if runtime.cold_start is not None:
            self.note_verdict(tenant, runtime.name)
        return record

    async def label_inline(
        self, tenant: str, checked: CheckedRequest, verdict_id: str
    ) -> LabelOutcome | None:
        """The request's inline label, stored as feedback on the new verdict (None: none)."""
        label = checked.request.label
        return None if label is None else await self.labels.label(tenant, verdict_id, label)

    # ------------------------------------------------------------------ 9. observe
    def observe(
        self, tenant: str, runtime: PanelRuntime, ballot: Ballot, verdict: Verdict,
        cascade_stage: str | None,
    ) -> None:
        """Per-judge vote and cost metrics, judge drift, the verdict's route and the overhead."""
        self.metrics.observe_votes(runtime.name, ballot.votes, tenant=tenant)
        self.monitors.observe_votes(tenant, runtime.name, ballot.votes)
        self.metrics.observe_verdict(tenant, runtime.name, verdict, cascade_stage)
        self.metrics.overhead.observe(verdict.timings["overhead_s"])
        self.metrics.sojourn.observe(verdict.timings["overhead_s"])


def _slowest(votes: list[JudgeVote]) -> float:
    return max((v.latency_s for v in votes), default=0.0)
