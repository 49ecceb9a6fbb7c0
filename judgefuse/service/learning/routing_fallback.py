"""A tune always ends with a threshold that routes the serving method (docs/design.md, 'Learning
keeps routing').

``POST /v1/thresholds/tune`` of the active method tunes on the verdicts that method made. A
learned model promoted before any target has few or none of its own labelled verdicts (its
labels came before it), so that tune can find nothing, and the refit at the target may not be
promoted either (its Brier gain within noise): the model would then serve with no threshold
and every verdict would go to review (the calm traffic of ``benchmarks/bench_calm_tune.py``).
:class:`RoutingFallback` finishes such
a tune, in this order, stopping at the first that qualifies:

1. the serving model's threshold tuned on the **cross-fitted** confidences of the learned
   method over every stored labelled vote set (the same evidence a refit pairs a threshold
   on: no label scores a model that saw it), weighted by review stratum; stored as a threshold
   version naming the serving model's version;
2. the panel's **voting method** with its threshold (re-fused on every stored vote set, as a
   tune of that method does), and the learned model is **retired**: a model record that names
   the voting method and carries ``params["retired"]`` so the state cache serves no model and
   new verdicts are the voting method's, routed by its threshold.

Only when neither qualifies does the tune's own answer stand (review everything, or nothing
stored). Both steps write against the serving pair read when the fallback began
(:mod:`judgefuse.service.learning.serving_pair`): a promotion that landed meanwhile is never
undone by a threshold or a retirement decided for the model it replaced. A retired model is history: the next refit that clears the promotion rule
(:mod:`judgefuse.service.learning.promotion`) promotes a new model with its paired threshold.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, cast

from judgefuse.calibration import ThresholdReport
from judgefuse.calibration.stratified_tuning import tune_threshold_stratified
from judgefuse.fusion import NotEnoughLabels, cross_fit_predict
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import LETTERS, JudgeVote, Letter
from judgefuse.service.judging.routing import routing_threshold
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.serving import ServingState
from judgefuse.service.learning.promotion import RETIRED, is_retired
from judgefuse.service.learning.serving_pair import ServingPair, read_pair
from judgefuse.service.learning.state_cache import StateCache
from judgefuse.service.ledger import ALL_METHODS, label_stratum_key, solicited, traffic_counts
from judgefuse.service.schemas import TuneRequest
from judgefuse.service.storage import (
    LabelLedger,
    ModelRecord,
    ServingVersions,
    ThresholdRecord,
    VersionedRecords,
)

__all__ = ["RoutingFallback", "crossfit_threshold"]


def crossfit_threshold(
    method: str, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[str], strata: Sequence[str],
    traffic: dict[str, int], *, target_precision: float, delta: float, min_count: int, n_folds: int,
) -> ThresholdReport | None:
    """The threshold of ``method`` tuned on its cross-fitted confidences over ``batches`` (CPU:
    run in a worker thread); None when it cannot be cross-fitted on these labels."""
    try:
        verdicts = cross_fit_predict(method, batches, [cast(Letter, y) for y in labels], n_folds=n_folds)
    except NotEnoughLabels:
        return None
    keep, kept, counts = solicited(strata, traffic)
    return tune_threshold_stratified(
        [verdicts[i].confidence if verdicts[i].choice is not None else 0.5 for i in keep],
        [verdicts[i].choice == labels[i] for i in keep], kept, counts,
        target_precision=target_precision, delta=delta, min_count=min_count,
    )


class RoutingFallback:
    """Finish a tune of the active method so that the serving method routes (module docstring)."""

    def __init__(
        self, versioned: VersionedRecords, labels: LabelLedger, serving: ServingState,
        state: StateCache, *, max_labels: int, n_folds: int, clock: Callable[[], float],
    ) -> None:
        self.versioned = versioned
        """Where the serving pair is read and written."""
        self.labels = labels
        """Where the labels and traffic counts the tune reads are."""
        self.serving = serving
        self.state = state
        self.max_labels = max_labels
        self.n_folds = n_folds
        self.clock = clock

    async def routes(self, tenant: str, runtime: PanelRuntime) -> bool:
        """Whether a threshold that auto-accepts applies to the serving method's verdicts now."""
        method, version = await self.serving.active_method(tenant, runtime)
        latest = await self.versioned.get_threshold(tenant, runtime.name)
        model = await self.versioned.get_model(tenant, runtime.name)
        probe = Verdict(choice="A", confidence=1.0, p_a=1.0, method=method, model_version=version)
        record = routing_threshold(latest, None if is_retired(model) else model, probe)
        return (record is not None and record.method == method
                and record.details.get("model_version") in (None, version)
                and not record.details.get("review_everything"))

    async def finish(
        self, tenant: str, request: TuneRequest,
        tune_method: Callable[[TuneRequest], Awaitable[dict[str, Any]]],
    ) -> dict[str, Any] | None:
        """Steps 1 and 2 of the module docstring when a learned model serves unrouted; None when
        there was nothing to do. ``tune_method``: the service's tune of a named method (step 2)."""
        runtime = self.serving.runtime(request.panel)
        pair = await read_pair(self.versioned, tenant, runtime.name)
        method, version = await self.serving.active_method(tenant, runtime)
        if request.method is not None or not runtime.is_learned(method) or await self.routes(tenant, runtime):
            return None
        moved = {"status": "none", "method": method, "model_version": version,
                 "reason": "the panel's threshold or model changed while falling back (a promotion "
                           "or a tune landed): nothing stored, what landed serves"}
        report = await self._serving_threshold(tenant, runtime, method, request)
        if report is not None and report.threshold is not None:
            stored = await self._store(tenant, runtime, method, version, request, report, pair)
            if stored is None:
                return moved
            return {"status": "tuned", "method": method, "model_version": version,
                    "threshold": stored.threshold, "version": stored.version,
                    "reason": f"tuned for the serving {method} model {version} on the cross-fitted "
                              f"confidences of {report.n} stored labelled votes"}
        voting = runtime.voting_method
        why = report.reason if report is not None else f"{method} cannot be cross-fitted on these labels"
        if runtime.default_method != voting:
            return {"status": "none", "method": method, "model_version": version,
                    "reason": f"{why}; the panel's configured method {runtime.default_method!r} is not "
                              "a voting method to fall back to"}
        tuned = await tune_method(request.model_copy(update={"method": voting}))
        if tuned.get("threshold") is None:
            return {"status": "none", "method": method, "model_version": version,
                    "reason": f"{why}; {voting}: {tuned.get('reason')}", "voting": tuned}
        # retire the model the fallback was decided for, and only it: the voting threshold just
        # stored is the one change allowed since the pair was read
        retired = await self.versioned.put_serving(
            tenant, runtime.name, expected=ServingVersions(tuned["version"], pair.versions.model),
            model=ModelRecord(
                panel=runtime.name, created_at=self.clock(), method=voting,
                params={RETIRED: True, "replaced": {"method": method, "model_version": version}},
            ))
        self.state.drop_model(tenant, runtime.name)
        if retired is None:
            return {**moved, "voting": tuned}
        return {"status": "fell_back", "method": voting, "model_version": None,
                "threshold": tuned["threshold"], "version": tuned["version"],
                "reason": f"no threshold qualifies for the serving {method} model {version} ({why}): "
                          f"{method} retired, {voting} serves with threshold {tuned['threshold']:.4g}",
                "voting": tuned}

    async def _serving_threshold(
        self, tenant: str, runtime: PanelRuntime, method: str, request: TuneRequest,
    ) -> ThresholdReport | None:
        records = await self.labels.iter_labelled(tenant, runtime.name, limit=self.max_labels)
        # oldest first; a cascade verdict holds only some votes; ties and "both bad" are not A/B
        records = [r for r in reversed(records) if r.verdict.method != "cascade" and r.label in LETTERS]
        traffic = await traffic_counts(self.labels, tenant, runtime.name, ALL_METHODS)
        return await asyncio.to_thread(
            crossfit_threshold, method, [list(r.verdict.votes) for r in records],
            [str(r.label) for r in records], [label_stratum_key(r) for r in records], traffic,
            target_precision=request.target_precision, delta=request.delta,
            min_count=request.min_count, n_folds=self.n_folds,
        )

    async def _store(
        self, tenant: str, runtime: PanelRuntime, method: str, version: str | None,
        request: TuneRequest, report: ThresholdReport, pair: ServingPair,
    ) -> ThresholdRecord | None:
        """Store the serving model's threshold against ``pair`` (None: it changed, nothing stored)."""
        assert report.threshold is not None
        record = ThresholdRecord(
            panel=runtime.name, threshold=report.threshold, created_at=self.clock(), method=method,
            target_precision=request.target_precision, delta=request.delta,
            coverage=report.coverage, n_labels=report.n,
            details={"report": report.as_dict(), "model_version": version,
                     "data": f"cross-fitted confidences of {method} on {report.n} stored labelled "
                             "votes (weighted by review stratum)"},
        )
        written = await self.versioned.put_serving(tenant, runtime.name, expected=pair.versions, threshold=record)
        if written is None:
            return None
        stored = await self.versioned.get_threshold(tenant, runtime.name, version=written.threshold)
        assert stored is not None
        self.state.store_threshold(tenant, runtime.name, stored)
        return stored
