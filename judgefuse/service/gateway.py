"""The core use case, framework-free: fan out to a panel, fuse, route, store; label; tune; refit.

:class:`Gateway` is built by the app's lifespan from settings, an open storage and started
panels, and is usable without HTTP (tests, benchmarks, other front ends).

Which fusion method decides a verdict (stamped on it as ``method`` + ``model_version``):

1. the request's ``method`` when given ("stacked" needs a promoted model);
2. else the promoted stacked model of (tenant, panel) when there is one;
3. else ``settings.fusion_method`` or the panel file's ``fusion``.

Routing (DESIGN.md "Routing"): ``auto_accept`` iff the latest threshold of (tenant, panel)
applies to the verdict and ``confidence >= threshold``. A threshold applies when it was tuned
for the verdict's method (and, for a learned method, the same model version). Otherwise, with
no threshold tuned, or a "review everything" record, the verdict goes to ``human_review`` and
``threshold.reason`` says why.

Thresholds and models are cached per (tenant, panel) for ``state_ttl_s`` (a write through this
gateway updates its cache at once; other replicas see it within the TTL).

Cascade panels (``cascade:`` in the panel YAML, :mod:`judgefuse.fusion.cascade`): a request
that names no ``method`` walks the cascade (:func:`~judgefuse.fusion.cascade.run_cascade_async`):
each stage asks only the judges it adds (concurrently, through the panel's own judges, within
what is left of the panel's ``deadline_s`` for the whole walk), and accepts when its
confidence clears its threshold. The cascade routes the verdict itself: a stage that accepts
-> ``auto_accept`` under the cascade's guarantee (the stage thresholds were tuned offline with
``judgefuse tune --cascade`` on labelled data, fixed-sequence Clopper-Pearson per stage, and
pasted into the YAML); no stage accepts -> ``human_review`` (the last stage's verdict is the
suggestion), or with ``cascade_fallback: panel`` the full panel decides at
``cascade_panel_threshold``. The stored per-(tenant, panel) threshold is not used for cascade
verdicts, and cascade thresholds are not re-tuned live from the store (``POST
/v1/thresholds/tune`` on a cascade panel answers 422 unless it names a voting method). The
response's ``cascade`` says which stage decided; its ``votes`` and ``cost`` are those of the
judges consulted. Quorum: a cascade accepts on its stages' own votes; the request fails (503)
only when no consulted judge gave a usable vote. A request naming a ``method`` bypasses the
cascade: every judge, fused with that method, routed by the stored threshold.

Cost: a verdict's ``cost`` (calls, tokens, USD) is the sum over its votes; /metrics and the
dashboard carry the same per judge and per panel (:mod:`judgefuse.service.metrics`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from judgefuse.fusion.cascade import CascadeDecision, run_cascade_async
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.service.calibration_store import label_increments
from judgefuse.service.errors import Conflict, FieldProblem, QuorumLost, TooLarge
from judgefuse.service.metrics import ServiceMetrics
from judgefuse.service.panels import PanelRuntime
from judgefuse.service.refit import RefitOutcome, RefitScheduler, refit, restore_stacked
from judgefuse.service.routing import route_verdict
from judgefuse.service.schemas import (
    BatchResponse,
    BatchResult,
    CascadeOut,
    CostOut,
    JudgeRequest,
    LabelResult,
    ThresholdUsed,
    TuneRequest,
    VerdictOut,
)
from judgefuse.service.settings import Settings
from judgefuse.service.storage import (
    LabelOutcome,
    ModelRecord,
    Storage,
    ThresholdRecord,
    VerdictExists,
    VerdictNotFound,
    VerdictRecord,
)

if TYPE_CHECKING:
    pass

__all__ = ["Gateway", "PanelRuntime", "route_verdict"]

log = logging.getLogger("judgefuse.service")


@dataclass
class _Cached:
    value: Any
    at: float


class Gateway:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        panels: dict[str, PanelRuntime],
        metrics: ServiceMetrics | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not panels:
            raise ValueError("a gateway needs at least one panel")
        self.settings = settings
        self.storage = storage
        self.panels = panels
        self.metrics = metrics or ServiceMetrics()
        self.clock = clock
        self.default_panel = settings.default_panel or next(iter(panels))
        if self.default_panel not in panels:
            raise ValueError(
                f"default_panel {self.default_panel!r} is not one of the panels: {', '.join(panels)}"
            )
        self._thresholds: dict[tuple[str, str], _Cached] = {}
        self._models: dict[tuple[str, str], _Cached] = {}
        self._restored: dict[tuple[str, str, int], Any] = {}
        self.scheduler = RefitScheduler(settings.refit_every_labels, self._background_refit)

    # ------------------------------------------------------------------ panels and state
    def runtime(self, name: str | None, *, field: str = "body.panel") -> PanelRuntime:
        name = name or self.default_panel
        runtime = self.panels.get(name)
        if runtime is None:
            raise FieldProblem(field, f"unknown panel {name!r}; panels: {', '.join(self.panels)}")
        return runtime

    def _fresh(self, cache: dict[tuple[str, str], _Cached], key: tuple[str, str]) -> _Cached | None:
        entry = cache.get(key)
        if entry is not None and time.monotonic() - entry.at <= self.settings.state_ttl_s:
            return entry
        return None

    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None:
        key = (tenant, panel)
        entry = self._fresh(self._thresholds, key)
        if entry is None:
            entry = _Cached(await self.storage.get_threshold(tenant, panel), time.monotonic())
            self._thresholds[key] = entry
        return entry.value

    async def model(self, tenant: str, panel: str) -> tuple[ModelRecord, Any] | None:
        """The promoted stacked model of (tenant, panel), restored, or None."""
        key = (tenant, panel)
        entry = self._fresh(self._models, key)
        if entry is None:
            record = await self.storage.get_model(tenant, panel)
            value = None
            if record is not None and record.version is not None:
                rkey = (tenant, panel, record.version)
                restored = self._restored.get(rkey)
                if restored is None:
                    restored = restore_stacked(record.params)
                    self._restored = {k: v for k, v in self._restored.items() if k[:2] != key}
                    self._restored[rkey] = restored
                value = (record, restored)
            entry = _Cached(value, time.monotonic())
            self._models[key] = entry
        return entry.value

    async def active_method(self, tenant: str, runtime: PanelRuntime) -> tuple[str, str | None]:
        """(method name, model version) new verdicts of (tenant, panel) get by default."""
        if runtime.cascade is not None:
            return "cascade", None
        model = await self.model(tenant, runtime.name)
        if model is not None:
            return "stacked", model[1].model_version
        return runtime.default_method, None

    # ------------------------------------------------------------------ judging
    def check_limits(self, request: JudgeRequest, prefix: str = "body") -> None:
        limit = self.settings.max_text_chars
        for name in ("question", "answer_a", "answer_b"):
            value = getattr(request, name)
            if len(value) > limit:
                raise FieldProblem(
                    f"{prefix}.{name}", f"too long: {len(value)} characters, at most {limit}"
                )
        for name in ("question", "answer_a", "answer_b", "id", "category", "panel", "method"):
            value = getattr(request, name)
            if value is not None and not _encodable(value):
                raise FieldProblem(f"{prefix}.{name}", "not valid Unicode text (a lone surrogate?)")
        if request.metadata and not _encodable(json.dumps(request.metadata, ensure_ascii=False)):
            raise FieldProblem(f"{prefix}.metadata", "not valid Unicode text (a lone surrogate?)")
        if not request.question.strip() and not (request.answer_a.strip() or request.answer_b.strip()):
            raise FieldProblem(f"{prefix}.question", "question and both answers are empty")

    async def _fuse(
        self, tenant: str, runtime: PanelRuntime, request: JudgeRequest, item: PairwiseItem,
        votes: list[JudgeVote],
    ) -> Verdict:
        name = request.method
        if name is None or name == "stacked":
            model = await self.model(tenant, runtime.name)
            if model is not None:
                return model[1](votes)
            if name == "stacked":
                raise FieldProblem(
                    "body.method",
                    f"no stacked model promoted for panel {runtime.name!r} yet "
                    "(POST /v1/fusion/refit once there are enough labels)",
                )
            name = runtime.default_method
        method = runtime.method(name)
        if name == "fuser":
            return await method.afuse(item, votes)  # type: ignore[attr-defined]
        return method(votes)

    async def judge(self, tenant: str, request: JudgeRequest, *, prefix: str = "body") -> VerdictOut:
        """One verdict: fan-out, quorum, fuse, route, store (and the inline label)."""
        started = time.perf_counter()
        self.check_limits(request, prefix)
        runtime = self.runtime(request.panel, field=f"{prefix}.panel")
        if request.method is not None and request.method != "stacked":
            runtime.method(request.method, field=f"{prefix}.method")  # 422 before any judge call
        verdict_id = request.id or uuid.uuid4().hex
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
        if runtime.cascade is not None and request.method is None:
            decision, slowest = await self._walk_cascade(runtime, item)
            votes = list(decision.verdict.votes)
            judged = fused = time.perf_counter()
            if not any(v.valid for v in votes):
                self.metrics.quorum_lost.labels(runtime.name).inc()
                self.metrics.observe_votes(runtime.name, votes)
                raise QuorumLost(runtime.name, votes, 1)
            verdict = decision.verdict
            route, used = _cascade_route(runtime, decision)
            stages = runtime.cascade.all_stages()
            cascade_out = CascadeOut.of(
                decision, stages=len(stages), names=[st.name for st in stages],
                fallback=runtime.cascade.fallback,
            )
            cascade_stage = ("review" if decision.stage is None
                             else f"{decision.stage + 1}:{stages[decision.stage].name}")
        else:
            votes = await runtime.panel.judge(item)
            judged = time.perf_counter()
            if not runtime.panel.quorum_met(votes):
                self.metrics.quorum_lost.labels(runtime.name).inc()
                self.metrics.observe_votes(runtime.name, votes)
                raise QuorumLost(runtime.name, votes, runtime.panel.config.quorum_count())
            verdict = await self._fuse(tenant, runtime, request, item, votes)
            fused = time.perf_counter()
            threshold = await self.threshold(tenant, runtime.name)
            route, used = route_verdict(verdict, threshold, panel=runtime.name)
            slowest = max((v.latency_s for v in votes), default=0.0)
        created_at = self.clock()
        verdict = verdict.model_copy(update={
            "id": verdict_id, "route": route, "threshold": used.value,
            "degraded": any(not v.valid for v in votes),
            "timings": {**verdict.timings, "judges_s": judged - started, "fuse_s": fused - judged,
                        "slowest_judge_s": slowest},
        })
        record = VerdictRecord(
            id=verdict_id, tenant=tenant, panel=runtime.name, created_at=created_at,
            verdict=verdict, item=item if self.settings.store_items else None,
        )
        storing = time.perf_counter()
        try:
            await self.storage.save_verdict(tenant, record)
        except VerdictExists:
            raise Conflict(f"verdict id {verdict_id!r} is already used",
                           fields=[(f"{prefix}.id", "already used")]) from None
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
        self.metrics.observe_votes(runtime.name, votes)
        self.metrics.observe_verdict(tenant, runtime.name, verdict, cascade_stage)
        self.metrics.overhead.observe(verdict.timings["overhead_s"])
        return VerdictOut.of(
            verdict, panel=runtime.name, threshold=used, created_at=created_at, label=label,
            labelled_at=labelled_at, feedback=feedback, category=request.category,
            cascade=cascade_out,
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

    async def _walk_cascade(
        self, runtime: PanelRuntime, item: PairwiseItem
    ) -> tuple[CascadeDecision, float]:
        """Run the panel's cascade live: each stage asks only the judges it adds, within what
        is left of the panel deadline. Returns the decision and the judges' share of the wall
        time (the sum over stages of the slowest vote drawn at that stage)."""
        assert runtime.cascade is not None
        panel = runtime.panel
        judges = {judge.name: judge for judge in panel.judges}
        deadline_s = panel.config.deadline_s
        started = time.perf_counter()
        waited = 0.0

        async def fetch(names: Sequence[str]) -> list[JudgeVote]:
            nonlocal waited
            budget = None
            if deadline_s is not None:
                budget = max(0.0, deadline_s - (time.perf_counter() - started))
            votes = await panel.judge_with([judges[name] for name in names], item, timeout_s=budget)
            waited += max((v.latency_s for v in votes), default=0.0)
            return votes

        decision = await run_cascade_async(runtime.cascade, fetch)
        return decision, waited

    async def judge_batch(self, tenant: str, requests: list[JudgeRequest]) -> BatchResponse:
        limit = self.settings.max_batch_items
        if len(requests) > limit:
            raise TooLarge(
                f"batch of {len(requests)} items; at most {limit} per request",
                fields=[("body.items", f"at most {limit} items")],
            )
        ids = [r.id for r in requests if r.id is not None]
        if len(ids) != len(set(ids)):
            raise FieldProblem("body.items", "two items share an id")
        for i, request in enumerate(requests):  # refuse a malformed batch before calling judges
            self.check_limits(request, f"body.items[{i}]")
            runtime = self.runtime(request.panel, field=f"body.items[{i}].panel")
            if request.method is not None and request.method != "stacked":
                runtime.method(request.method, field=f"body.items[{i}].method")

        async def one(i: int, request: JudgeRequest) -> BatchResult:
            from judgefuse.service.errors import ServiceError

            try:
                verdict = await self.judge(tenant, request, prefix=f"body.items[{i}]")
                return BatchResult(index=i, status=200, verdict=verdict)
            except ServiceError as exc:
                return BatchResult(index=i, status=exc.status, error=exc.body())

        results = await asyncio.gather(*(one(i, r) for i, r in enumerate(requests)))
        n_ok = sum(1 for r in results if r.status == 200)
        cost = CostOut.total(r.verdict.cost for r in results if r.verdict is not None)
        return BatchResponse(results=list(results), n_ok=n_ok, n_failed=len(results) - n_ok,
                             cost=cost)

    async def get_verdict(self, tenant: str, verdict_id: str) -> VerdictOut:
        _check_verdict_id(tenant, verdict_id)
        record = await self.storage.get_verdict(tenant, verdict_id)
        if record is None:
            raise VerdictNotFound(tenant, verdict_id)
        verdict = record.verdict
        used = ThresholdUsed(
            value=verdict.threshold, version=None,
            reason="as routed when the verdict was made",
        )
        runtime = self.panels.get(record.panel)
        cascade = runtime.cascade if runtime is not None else None
        return VerdictOut.of(
            verdict, panel=record.panel, threshold=used, created_at=record.created_at,
            label=record.label, labelled_at=record.labelled_at,
            category=record.item.category if record.item else None,
            cascade=CascadeOut.of_stored(
                verdict, fallback=cascade.fallback if cascade is not None else None,
                stages=len(cascade.all_stages()) if cascade is not None else None,
            ),
        )

    # ------------------------------------------------------------------ labels
    async def _label(self, tenant: str, verdict_id: str, label: Letter) -> LabelOutcome:
        outcome = await self.storage.set_label(tenant, verdict_id, label, label_increments)
        panel = outcome.record.panel
        self.metrics.labels.labels(tenant, panel, outcome.status).inc()
        if outcome.status == "labelled":
            self.scheduler.note_label(tenant, panel)
        return outcome

    async def feedback(self, tenant: str, verdict_id: str, label: Letter) -> LabelResult:
        _check_verdict_id(tenant, verdict_id)
        return _label_result(await self._label(tenant, verdict_id, label))

    # ------------------------------------------------------------------ thresholds
    async def tune(self, tenant: str, request: TuneRequest) -> dict[str, Any]:
        """Tune the auto-accept threshold from the labelled store; store it (see the docs)."""
        from judgefuse.calibration import tune_threshold

        runtime = self.runtime(request.panel)
        if request.method is not None:
            method_name, model_version = request.method, None
            if method_name == "stacked":
                model = await self.model(tenant, runtime.name)
                if model is None:
                    raise FieldProblem("body.method", "no stacked model promoted for this panel")
                model_version = model[1].model_version
            else:
                runtime.method(method_name)
        else:
            method_name, model_version = await self.active_method(tenant, runtime)
            if method_name == "cascade":
                raise FieldProblem(
                    "body.method",
                    f"panel {runtime.name!r} serves a cascade: its stage thresholds are tuned "
                    "offline ('judgefuse tune --cascade') and read from the panel YAML; name a "
                    "voting method to tune the threshold of requests that bypass the cascade",
                )
        records = await self.storage.iter_labelled(
            tenant, runtime.name, limit=self.settings.refit_max_labels
        )
        confidences: list[float] = []
        correct: list[bool] = []
        how: str
        if method_name == "stacked":
            # only verdicts this very model made: their labels were never in its training set
            how = f"verdicts made by stacked model {model_version} (held out from its fit)"
            for r in records:
                v = r.verdict
                if v.method == "stacked" and v.model_version == model_version:
                    confidences.append(v.confidence if v.choice else 0.5)
                    correct.append(v.choice == r.label)
        elif method_name == "fuser":
            how = "verdicts made by the fuser"
            for r in records:
                if r.verdict.method == "fuser":
                    confidences.append(r.verdict.confidence)
                    correct.append(r.verdict.choice == r.label)
        else:
            # a voting method is a pure function of the stored votes: re-fuse every record
            how = f"every labelled verdict's votes re-fused with {method_name}"
            method = runtime.method(method_name)
            for r in records:
                if r.verdict.method == "cascade":
                    continue  # a cascade verdict holds only the votes of the judges it consulted
                v = method(r.verdict.votes)
                confidences.append(v.confidence)
                correct.append(v.choice == r.label)
        base: dict[str, Any] = {
            "panel": runtime.name, "method": method_name, "model_version": model_version,
            "n_labels": len(confidences), "data": how,
        }
        if not confidences:
            return {**base, "stored": False, "threshold": None, "version": None,
                    "reason": f"no labelled verdicts for method {method_name!r}: nothing stored",
                    "report": None}
        report = await asyncio.to_thread(
            tune_threshold, confidences, correct, target_precision=request.target_precision,
            delta=request.delta, min_count=request.min_count,
        )
        details: dict[str, Any] = {"report": report.as_dict(), "data": how}
        if model_version:
            details["model_version"] = model_version
        if report.threshold is None:
            if not report.path:
                # no candidate was testable: too few labels is no evidence against the
                # current threshold, so keep it
                return {**base, "stored": False, "threshold": None, "version": None,
                        "reason": report.reason + "; nothing stored, the current threshold stays",
                        "report": report.as_dict()}
            # the data contradicts every threshold: store a "review everything" record
            details.update(review_everything=True, reason=report.reason)
            value = 1.0
        else:
            value = report.threshold
        record = ThresholdRecord(
            panel=runtime.name, threshold=value, created_at=self.clock(), method=method_name,
            target_precision=request.target_precision, delta=request.delta,
            coverage=report.coverage, n_labels=report.n, details=details,
        )
        version = await self.storage.put_threshold(tenant, runtime.name, record)
        stored = await self.storage.get_threshold(tenant, runtime.name, version=version)
        self._thresholds[(tenant, runtime.name)] = _Cached(stored, time.monotonic())
        return {**base, "stored": True, "threshold": report.threshold, "version": version,
                "review_everything": report.threshold is None, "reason": report.reason,
                "report": report.as_dict()}

    # ------------------------------------------------------------------ refit
    async def refit(self, tenant: str, panel: str | None) -> RefitOutcome:
        runtime = self.runtime(panel)
        outcome, _fitted = await refit(
            self.storage, tenant, runtime.name, voting_method=runtime.default_method
            if runtime.default_method != "fuser" else "majority",
            min_labels=self.settings.min_labels_for_refit,
            max_labels=self.settings.refit_max_labels, n_folds=self.settings.refit_folds,
            now=self.clock,
        )
        self.metrics.refits.labels(tenant, runtime.name, outcome.status).inc()
        if outcome.status == "promoted":
            self._models.pop((tenant, runtime.name), None)
        log.info("refit %s/%s: %s (%s)", tenant, runtime.name, outcome.status, outcome.reason)
        return outcome

    async def _background_refit(self, tenant: str, panel: str) -> None:
        await self.refit(tenant, panel)

    async def aclose(self) -> None:
        await self.scheduler.aclose()


def _encodable(text: str) -> bool:
    """True when ``text`` can be stored and returned as UTF-8 (JSON lets lone surrogates in)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_verdict_id(tenant: str, verdict_id: str) -> None:
    """An id no verdict can have (empty, over 256 characters, not UTF-8) is simply not found."""
    if not verdict_id or len(verdict_id) > 256 or not _encodable(verdict_id):
        shown = verdict_id[:64].encode("utf-8", "replace").decode("utf-8")
        raise VerdictNotFound(tenant, shown + ("..." if len(verdict_id) > 64 else ""))


def _cascade_route(runtime: PanelRuntime, decision: CascadeDecision) -> tuple[str, ThresholdUsed]:
    """The cascade routes its own verdict: accepted by a stage -> auto_accept, else review."""
    assert runtime.cascade is not None
    stages = runtime.cascade.all_stages()
    verdict = decision.verdict
    if decision.stage is not None:
        stage = stages[decision.stage]
        return "auto_accept", ThresholdUsed(
            value=stage.threshold, version=None, method="cascade",
            reason=f"cascade stage {decision.stage + 1}/{len(stages)} ({stage.name}) accepted: "
                   f"confidence {verdict.confidence:.4f} >= its threshold "
                   f"{stage.threshold:.4f} (panel file)",
        )
    return "human_review", ThresholdUsed(
        value=None, version=None, method="cascade",
        reason=f"cascade: none of the {len(stages)} stage(s) accepted"
               + (" (the full panel included)" if runtime.cascade.fallback == "panel" else "")
               + ": human review",
    )


def _label_result(outcome: LabelOutcome) -> LabelResult:
    return LabelResult(
        verdict_id=outcome.record.id, status=outcome.status, label=outcome.label,
        previous=outcome.previous, keys_updated=sorted(outcome.applied),
    )
