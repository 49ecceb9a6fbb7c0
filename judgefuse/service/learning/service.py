"""The learning slice's service: tune thresholds, refit learned fusion, fit the cold start, and
schedule the last two in the background.

Everything here learns from what judging and review wrote (labelled verdicts, the traffic
counters of the ledger, stored votes) and hands what it learnt back to serving through the
state cache (:mod:`judgefuse.service.learning.state_cache`): a stored threshold is cached at
once, a promoted model is dropped so the next verdict restores it. Serving itself (the panel,
its promoted model, the method new verdicts get) is read through
:class:`~judgefuse.service.kernel.serving.ServingState`, which the gateway satisfies, so learning never
imports the gateway.

Two schedulers count toward the next background run (:class:`~judgefuse.service.learning.refit_scheduler.RefitScheduler`):
labels for a refit (review calls :meth:`LearningService.note_label`) and verdicts for a
label-free cold start (judging calls ``cold_start_scheduler.note``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from judgefuse.fusion.capabilities import LEARNED_METHOD
from judgefuse.service.errors import FieldProblem
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.serving import ServingState
from judgefuse.service.kernel.shared_state import StateContention
from judgefuse.service.learning.cold_start import cold_start_fit
from judgefuse.service.learning.pooled_inputs import PooledInputs, pooled_inputs, tune_pooled
from judgefuse.service.learning.promotion import PromotionTarget
from judgefuse.service.learning.refit import RefitBounds, RefitOutcome, refit
from judgefuse.service.learning.refit_log import RefitLog
from judgefuse.service.learning.refit_once import LabelSetOnce
from judgefuse.service.learning.refit_scheduler import RefitScheduler
from judgefuse.service.learning.refit_worker import RefitWorkers, WorkerBudget
from judgefuse.service.learning.routing_fallback import RoutingFallback
from judgefuse.service.learning.serving_pair import WRITE_ATTEMPTS, read_pair
from judgefuse.service.learning.signal_caps import SignalCaps
from judgefuse.service.learning.state_cache import StateCache
from judgefuse.service.learning.tuning_data import tuning_data
from judgefuse.service.learning.worker_priority import worker_nice
from judgefuse.service.ledger import ALL_METHODS, solicited, traffic_counts
from judgefuse.service.responses import ModelsOut, ThresholdOut, ThresholdsOut
from judgefuse.service.schemas import TuneRequest
from judgefuse.service.settings import Settings
from judgefuse.service.storage import Storage, ThresholdRecord

__all__ = ["LearningService"]

log = logging.getLogger("judgefuse.service")

REFIT_ATTEMPTS = 3
"""Refits of one call: the first, and one more each time the target changed while the last
ran (a tune landing mid-refit is rare; three in a row are a tuning storm, answered as kept)."""


class LearningService:
    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        serving: ServingState,
        state: StateCache,
        metrics: ServiceMetrics,
        *,
        owner: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.storage = storage
        self.serving = serving
        self.state = state
        self.metrics = metrics
        self.clock = clock
        learning = settings.learning
        worker_nice()  # a bad JUDGEFUSE_REFIT_NICE stops the start, not a refit later
        self.refit_bounds = RefitBounds(
            caps=SignalCaps(learning.max_signals_per_judge, learning.refit_max_features),
            workers=RefitWorkers(WorkerBudget(learning.refit_timeout_s, learning.refit_memory_mb),
                                 workers=learning.refit_workers),
            once=LabelSetOnce(storage, hold_s=learning.refit_timeout_s + 60.0, clock=clock),
        )
        """Bounded learning: signal caps, budgeted worker processes, one refit per label set."""
        self.refit_scheduler = RefitScheduler(
            settings.learning.refit_every_labels, self._background_refit, storage=storage,
            owner=owner, clock=clock, count=storage.count_labelled,
        )
        """Background refits every ``refit_every_labels`` labels of a panel."""
        self.cold_start_scheduler = RefitScheduler(
            settings.learning.cold_start_every_verdicts, self._background_cold_start, storage=storage,
            owner=owner, clock=clock, count=self._verdict_count, lease="cold_start",
        )
        """Label-free cold-start fits every N verdicts of a panel (:mod:`judgefuse.service.learning.cold_start`)."""
        self.routing_fallback = RoutingFallback(
            storage, storage, serving, state, max_labels=settings.learning.refit_max_labels,
            n_folds=settings.learning.refit_folds, clock=clock,
        )
        """Finishes a tune whose serving model nothing routes (:mod:`judgefuse.service.learning.routing_fallback`)."""
        self.refit_log = RefitLog(storage, clock)
        """Every refit's outcome and reason (:mod:`judgefuse.service.learning.refit_log`)."""

    def note_label(self, tenant: str, panel: str) -> None:
        """One more first label of (tenant, panel): the refit scheduler's count."""
        self.refit_scheduler.note_label(tenant, panel)

    # ------------------------------------------------------------------ thresholds
    async def thresholds(self, tenant: str, runtime: PanelRuntime) -> ThresholdsOut:
        """``GET /v1/thresholds``: every stored version (the latest is ``current``) and the
        method new verdicts get."""
        history = await self.storage.threshold_history(tenant, runtime.name)
        active_method, model_version = await self.serving.active_method(tenant, runtime)
        return ThresholdsOut(
            panel=runtime.name,
            active_method=active_method,
            model_version=model_version,
            current=_public(history[-1]) if history else None,
            history=[_public(r) for r in history],
        )

    async def tune(self, tenant: str, request: TuneRequest) -> dict[str, Any]:
        """Tune and store the threshold (:meth:`_tune`); then, when a learned model serves
        without a threshold paired with it (promoted before any target was set), refit at the
        requested target so the model and its threshold are promoted together and routing
        starts now, not at the next scheduled refit (the answer's ``refit`` says what happened).
        """
        result = await self._tune(tenant, request)
        runtime = self.serving.runtime(request.panel)
        promoted = await self.serving.model(tenant, runtime.name) if runtime.cascade is None else None
        if request.method is None and promoted is not None and promoted[0].threshold is None:
            outcome = await self.refit(tenant, runtime.name, target=PromotionTarget(
                request.target_precision, request.delta, request.min_count), trigger="tune")
            result["refit"] = outcome.as_dict()
        # still nothing routes the serving model: its cross-fitted threshold, else the voting
        # method with its threshold (routing_fallback.py); never review-everything by default
        fallback = await self.routing_fallback.finish(tenant, request, functools.partial(self._tune, tenant))
        if fallback is not None:
            result["fallback"] = fallback
        return result

    async def _tune(self, tenant: str, request: TuneRequest) -> dict[str, Any]:
        """Tune the auto-accept threshold from the labelled store and store it against the
        serving pair it was tuned for (:mod:`judgefuse.service.learning.serving_pair`): a
        promotion (or another tune) that lands while this one searches makes it tune again for
        what serves then, so a threshold never names a method that no longer serves."""
        runtime = self.serving.runtime(request.panel)
        for _attempt in range(WRITE_ATTEMPTS):
            pair = await read_pair(self.storage, tenant, runtime.name)
            # the method is decided on the model in force, not on this replica's cached view
            self.state.drop_model(tenant, runtime.name)
            result, record = await self._tuned(tenant, request, runtime)
            if record is None:
                return result
            written = await self.storage.put_serving(tenant, runtime.name, expected=pair.versions,
                                                     threshold=record)
            if written is not None:
                stored = await self.storage.get_threshold(tenant, runtime.name, version=written.threshold)
                self.state.store_threshold(tenant, runtime.name, stored)
                return {**result, "stored": True, "version": written.threshold}
        raise StateContention(f"the threshold and model of panel {runtime.name!r} kept changing "
                              f"while tuning ({WRITE_ATTEMPTS} tries); retry")

    async def _tuned(
        self, tenant: str, request: TuneRequest, runtime: PanelRuntime,
    ) -> tuple[dict[str, Any], ThresholdRecord | None]:
        """The tune's answer and the threshold record to store (None: nothing to store).

        The labels are weighted by review stratum (``tune_threshold_stratified``): each
        stratum's labels stand for its N_s verdicts (traffic counters, all time); unsolicited
        labels (verdicts never queued) are left out, as nobody chose them at random."""
        from judgefuse.calibration.stratified_tuning import tune_threshold_stratified

        if request.method is not None:
            method_name, model_version = request.method, None
            if runtime.is_learned(method_name):
                model = await self.serving.model(tenant, runtime.name)
                if model is None or (model[0].method or LEARNED_METHOD) != method_name:
                    raise FieldProblem("body.method", f"no {method_name} model promoted for this panel")
                model_version = model[1].model_version
            else:
                runtime.method(method_name)
        else:
            method_name, model_version = await self.serving.active_method(tenant, runtime)
            if method_name == "cascade":
                raise FieldProblem(
                    "body.method",
                    f"panel {runtime.name!r} serves a cascade: its stage thresholds are tuned "
                    "offline ('judgefuse tune --cascade') and read from the panel YAML; name a "
                    "voting method to tune the threshold of requests that bypass the cascade",
                )
        records = await self.storage.iter_labelled(
            tenant, runtime.name, limit=self.settings.learning.refit_max_labels
        )
        data = tuning_data(records, runtime, method_name, model_version)
        # N_s: every verdict of the strata (a voting method is re-fused on every record, so its
        # population is the panel's whole traffic; a learned or item-reading method's, its own)
        traffic_method = ALL_METHODS if runtime.capabilities(method_name).voting else method_name
        keep, strata, population = solicited(
            data.strata, await traffic_counts(self.storage, tenant, runtime.name, traffic_method))
        confidences = [data.confidences[i] for i in keep]
        correct = [data.correct[i] for i in keep]
        how = (f"{data.how}; weighted by review stratum ({len(keep)} labels; "
               f"{len(data.strata) - len(keep)} unsolicited left out)")
        base: dict[str, Any] = {
            "panel": runtime.name, "method": method_name, "model_version": model_version,
            "n_labels": len(confidences), "n_unsolicited": len(data.strata) - len(keep),
            "data": how, "population": population,
        }
        if not confidences:
            return {**base, "stored": False, "threshold": None, "version": None,
                    "reason": f"no labelled verdicts for method {method_name!r}: nothing stored",
                    "report": None}, None
        # every stamp says how its label was routed by this method: pool by inclusion
        # probability (pooled_inputs.py); otherwise the stratified bound
        pooled = pooled_inputs(confidences, correct, [data.routing[i] for i in keep],
                               on_drift=runtime.panel.config.on_drift)
        if isinstance(pooled, PooledInputs):
            report = await asyncio.to_thread(
                tune_pooled, pooled, strata, population, target_precision=request.target_precision,
                delta=request.delta, min_count=request.min_count)
            how = f"{data.how}; pooled by inclusion probability ({len(keep)} labels)"
        else:
            report = await asyncio.to_thread(
                tune_threshold_stratified, confidences, correct, strata, population,
                target_precision=request.target_precision, delta=request.delta,
                min_count=request.min_count,
            )
            how += f"; not pooled: {pooled}"
        base["data"] = how
        details: dict[str, Any] = {"report": report.as_dict(), "data": how}
        if model_version:
            details["model_version"] = model_version
        if report.threshold is None:
            if not report.path:
                # no candidate was testable: too few labels is no evidence against the
                # current threshold, so keep it
                return {**base, "stored": False, "threshold": None, "version": None,
                        "reason": report.reason + "; nothing stored, the current threshold stays",
                        "report": report.as_dict()}, None
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
        return {**base, "threshold": report.threshold, "review_everything": report.threshold is None,
                "reason": report.reason, "report": report.as_dict()}, record

    # ------------------------------------------------------------------ refit
    async def models(self, tenant: str, runtime: PanelRuntime) -> ModelsOut:
        """``GET /v1/fusion/models``: every stored model version and the method new verdicts get."""
        history = await self.storage.model_history(tenant, runtime.name)
        active_method, model_version = await self.serving.active_method(tenant, runtime)
        return ModelsOut(
            panel=runtime.name, active_method=active_method, model_version=model_version,
            history=list(history),
        )

    async def refit(
        self, tenant: str, panel: str | None, *, target: PromotionTarget | None = None,
        method: str | None = None, trigger: str = "api",
    ) -> RefitOutcome:
        """Refit learned fusion; a promotion stores the model with a threshold tuned for it at
        ``target`` or else the target of the panel's latest threshold (so routing goes on: see
        :mod:`judgefuse.service.learning.refit`). A cascade panel is refused: its verdicts hold only
        the votes of the stages they reached, and a model fitted on such partial vote sets
        would be scored on full ones. ``method``: the refittable method to fit (default
        ``settings.learning.refit_method``; anything else is a 422 naming ``body.method``).
        ``trigger``: what started it, for the refit log (``api``, ``background``, ``tune``,
        ``console``)."""
        runtime = self.serving.runtime(panel)
        learned = method or self.settings.learning.refit_method
        if not runtime.capabilities(learned).refittable:
            raise FieldProblem("body.method", f"{learned!r} cannot be refitted from labels "
                                              "(e.g. stacked, dawid_skene+platt)")
        if runtime.cascade is not None:
            active, version = await self.serving.active_method(tenant, runtime)
            outcome = RefitOutcome(
                status="skipped", panel=runtime.name, n_labels=0, active_method=active,
                model_version=version,
                reason=(f"panel {runtime.name!r} serves a cascade: its verdicts hold only the votes "
                        "of the stages each item reached, so learned fusion is not fitted on them "
                        "(tune the stage thresholds offline: 'judgefuse tune --cascade')"),
            )
            self.metrics.refits.labels(tenant, runtime.name, outcome.status).inc()
            await self.refit_log.record(tenant, outcome, trigger=trigger)
            return outcome
        for _attempt in range(REFIT_ATTEMPTS):
            # the target is read again for each attempt: one that changed while the last ran
            # voided its promotion (refit.py, 5), and this one is evaluated at it
            latest = await self.storage.get_threshold(tenant, runtime.name)
            outcome, _fitted = await refit(
                self.storage, self.storage, self.storage, tenant, runtime.name,
                voting_method=runtime.voting_method,
                min_labels=self.settings.learning.min_labels_for_refit,
                max_labels=self.settings.learning.refit_max_labels, n_folds=self.settings.learning.refit_folds,
                now=self.clock, target=target or PromotionTarget.of(latest),
                promote_on=runtime.panel.config.promote_on,
                traffic=await traffic_counts(self.storage, tenant, runtime.name, ALL_METHODS),
                learned=learned, bounds=self.refit_bounds,
                basis=(latest.version or 0) if latest is not None else 0,
            )
            if not outcome.retry:
                break
            log.info("refit %s/%s: %s; refitting at the target in force", tenant, runtime.name, outcome.reason)
            target = None
        self.metrics.refits.labels(tenant, runtime.name, outcome.status).inc()
        if outcome.status == "promoted":
            self.state.drop_model(tenant, runtime.name)
            if outcome.threshold_version is not None:
                self.state.store_threshold(
                    tenant, runtime.name,
                    await self.storage.get_threshold(tenant, runtime.name,
                                                     version=outcome.threshold_version),
                )
        log.info("refit %s/%s: %s (%s)", tenant, runtime.name, outcome.status, outcome.reason)
        await self.refit_log.record(tenant, outcome, trigger=trigger)
        return outcome

    async def _background_refit(self, tenant: str, panel: str) -> None:
        await self.refit(tenant, panel, trigger="background")

    async def refits(self, tenant: str, runtime: PanelRuntime, limit: int) -> dict[str, Any]:
        """``GET /v1/fusion/refits``: the panel's newest refits and cold-start fits, newest first,
        each with its outcome and reason, and the method new verdicts get."""
        active_method, model_version = await self.serving.active_method(tenant, runtime)
        return {"panel": runtime.name, "active_method": active_method, "model_version": model_version,
                "refits": await self.refit_log.recent(tenant, runtime.name, limit)}

    async def cold_start_fit(self, tenant: str, panel: str | None, *, trigger: str = "api") -> RefitOutcome:
        """Fit the panel's label-free cold-start method on its stored votes and serve it
        (:mod:`judgefuse.service.learning.cold_start`); a panel without one is a 422 naming ``body.panel``."""
        runtime = self.serving.runtime(panel)
        if runtime.cold_start is None:
            raise FieldProblem("body.panel", f"panel {runtime.name!r} has no cold-start method (its "
                                             f"fusion {runtime.default_method!r} is not fitted without "
                                             "labels; e.g. fusion: dawid_skene)")
        outcome, _fitted = await cold_start_fit(
            self.storage, self.storage, tenant, runtime.name, method=runtime.cold_start,
            window=self.settings.learning.cold_start_window,
            min_verdicts=self.settings.learning.cold_start_min_verdicts, now=self.clock,
        )
        self.metrics.refits.labels(tenant, runtime.name, outcome.status).inc()
        if outcome.status == "promoted":
            self.state.drop_model(tenant, runtime.name)
        log.info("cold start %s/%s: %s (%s)", tenant, runtime.name, outcome.status, outcome.reason)
        await self.refit_log.record(tenant, outcome, trigger=trigger, kind="cold start")
        return outcome

    async def _background_cold_start(self, tenant: str, panel: str) -> None:
        await self.cold_start_fit(tenant, panel, trigger="background")

    async def _verdict_count(self, tenant: str, panel: str) -> int:
        """The panel's verdicts so far (its review-stratum traffic counters): the cold start's rounds."""
        return sum((await traffic_counts(self.storage, tenant, panel, ALL_METHODS)).values())

    async def aclose(self) -> None:
        await self.refit_scheduler.aclose()
        await self.cold_start_scheduler.aclose()


def _public(record: ThresholdRecord) -> ThresholdOut:
    return ThresholdOut(**record.model_dump(),
                        review_everything=bool(record.details.get("review_everything")))
