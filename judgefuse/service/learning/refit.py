"""Learned fusion from labelled traffic: fit, compare, promote, serialise (docs/design.md, 'Fusion').

:func:`refit` reads the tenant+panel's labelled verdicts (their stored votes and labels):

1. fewer than ``min_labels`` labels -> stay on the voting method, say why (nothing stored);
2. cross-fitted stacked verdicts (:func:`~judgefuse.fusion.cross_fit_predict`, stratified
   folds) and the voting method's verdicts on the same labels; Brier of each (an undecided
   verdict counts as confidence 0.5, wrong);
3. with a **target** (the target precision and delta of the panel's latest tuned threshold):
   tune the candidate's auto-accept threshold on the same labels from its **cross-fitted**
   confidences (no label scores a model that saw it), and the voting method's the same way;
   each one's review load at the target is 1 - its coverage (1 when no threshold qualifies);
4. **promote** per the panel's ``promote_on``: ``both`` (default) needs stacked Brier below the
   voting Brier by more than its noise (:mod:`judgefuse.service.learning.promotion`: a paired
   bootstrap bound of the difference) AND review load <= the voting method's; ``brier`` or
   ``review_load`` weigh one. Without a target the Brier rule applies whatever ``promote_on``.
   With a target, a candidate for which no threshold qualifies is never promoted (it could
   only send everything to review): the current model and threshold keep serving. To promote:
   fit on every label, serialise (the method's ``to_params``), check the round trip reproduces
   the fitted model's P(A) on the training votes, and store the tuned threshold (a new
   threshold version naming the new model version) together with the :class:`ModelRecord`
   that embeds it: one record holds the pair, so a reader never gets the model without its
   threshold (:mod:`judgefuse.service.judging.routing`). Otherwise nothing is stored and the
   outcome says why, with both methods' Brier and review load.
5. the promotion is decided against the **target in force when it is applied**, not the one
   the job read at its start (:mod:`judgefuse.service.learning.serving_pair`): the pair is read
   again and written with one compare-and-set on both versions. A target tuned (or changed)
   since the job read it voids the decision: nothing is stored and the outcome asks to be
   run again at the new target (``retry``); a write that loses to another writer of the same
   target reads the pair again and tries again. A refit's worker may start minutes after its
   job was made (a niced process on a busy machine): a target tuned meanwhile once met a model
   promoted without a threshold, and every verdict went to review as ``method_mismatch``
   (issue 45).

The learned method is any registered method that is *refittable*
(:func:`judgefuse.fusion.capabilities.capabilities`: requires a fit, saves and restores its
parameters with ``to_params``/``from_params``, builds without options); the default is
:data:`~judgefuse.fusion.capabilities.REFIT_METHOD` (``offset_stacked``). Nothing here names it. The round-trip
check guards against drift between a method's ``to_params`` and ``from_params``.

Where it runs (docs/design.md, 'Bounded learning'): with :class:`RefitBounds`, in a budgeted
worker process that **reads the labelled records itself** (:func:`refit_in_worker`: it gets the
store's URL, the tenant, the panel and what to fit, never the records). The gateway does no
per-record work for a refit: it learns the label set's size and digest from the worker, decides
whether this label set is to be fitted here (:class:`~judgefuse.service.learning.refit_once.LabelSetOnce`),
and stores what the worker returns (the fitted model's parameters and the metrics). Parsing and
pickling 2,000 records of 13 judges once took ~1 s of the gateway's CPU per refit, next to its
event loop. A store that cannot be reopened by URL in another process (``reopen_url()`` is None)
is read here and the job carries its votes. Without bounds (offline use) everything runs in a
thread. :class:`RefitScheduler` runs the automatic refits in the background.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

import numpy as np

from judgefuse.calibration import ThresholdReport
from judgefuse.calibration.stratified_tuning import tune_threshold_stratified
from judgefuse.fusion import FusionMethod, LearnedFusionMethod, NotEnoughLabels, cross_fit_predict, get_method
from judgefuse.fusion.capabilities import REFIT_METHOD, capabilities, method_params, restore_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter
from judgefuse.service.learning.promotion import brier_evidence, brier_problem
from judgefuse.service.learning.refit_once import LabelSetOnce, label_set_digest
from judgefuse.service.learning.refit_worker import RefitWorkerFailed, RefitWorkers, WorkerJob
from judgefuse.service.learning.serving_pair import WRITE_ATTEMPTS, ServingPair, read_pair
from judgefuse.service.learning.signal_caps import SignalCaps, TooManyFeatures, cap_signals
from judgefuse.service.ledger import label_stratum_key, solicited
from judgefuse.service.storage import ModelRecord, Storage, ThresholdRecord, VerdictRecord, open_storage

__all__ = [
    "PromoteOn",
    "RefitBounds",
    "RefitJob",
    "evaluate_bounded",
    "PromotionTarget",
    "promotion_problems",
    "RefitOutcome",
    "RefitScheduler",
    "refit",
    "refit_in_worker",
]

log = logging.getLogger("judgefuse.service.learning.refit")

PromoteOn = Literal["both", "brier", "review_load"]


@dataclass(frozen=True)
class PromotionTarget:
    """What a promoted model's threshold must guarantee (from the panel's latest tuned one)."""

    target_precision: float
    delta: float
    min_count: int = 30

    @classmethod
    def of(cls, record: ThresholdRecord | None) -> PromotionTarget | None:
        """The target of a tuned threshold record; None when there is none to keep."""
        if record is None or record.target_precision is None or record.delta is None:
            return None
        report = record.details.get("report") or {}
        min_count = report.get("min_count") if isinstance(report, dict) else None
        return cls(record.target_precision, record.delta,
                   int(min_count) if isinstance(min_count, int) and min_count >= 1 else 30)

    def __str__(self) -> str:
        return f"precision {self.target_precision:g} at delta {self.delta:g}"


def brier_of(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    total = 0.0
    for verdict, label in zip(verdicts, labels, strict=True):
        if verdict.choice is None:
            total += 0.25
        else:
            z = 1.0 if verdict.choice == label else 0.0
            total += (verdict.confidence - z) ** 2
    return total / len(labels)


def _scored(verdicts: Sequence[Verdict], labels: Sequence[str]) -> tuple[list[float], list[bool]]:
    """(confidence, correct) per verdict as :func:`brier_of` scores it (undecided: 0.5, wrong)."""
    return ([v.confidence if v.choice is not None else 0.5 for v in verdicts],
            [v.choice is not None and v.choice == y for v, y in zip(verdicts, labels, strict=True)])


def accuracy_of(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    return sum(v.choice == y for v, y in zip(verdicts, labels, strict=True)) / len(labels)


@dataclass
class RefitOutcome:
    status: str  # promoted | kept | skipped
    reason: str
    panel: str
    n_labels: int
    active_method: str
    model_version: str | None = None
    version: int | None = None
    metrics: dict[str, float] | None = None
    threshold: float | None = None
    """The threshold promoted with the model (None: none paired)."""
    threshold_version: int | None = None
    retry: bool = False
    """Not promoted because the target changed while the refit ran: run it again at the
    target in force (never in the answer: the caller acts on it)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "panel": self.panel,
            "n_labels": self.n_labels, "active_method": self.active_method,
            "model_version": self.model_version, "version": self.version,
            "metrics": self.metrics, "threshold": self.threshold,
            "threshold_version": self.threshold_version,
        }


@dataclass(frozen=True)
class Population:
    """Who the labels stand for, as ``POST /v1/thresholds/tune`` weighs them: each label's review
    stratum key (``review``, ``auto@{rate}``, ``unsolicited``) and N_s, the panel's verdicts per
    stratum (traffic counters). Unsolicited labels are fitted on but never tune a threshold."""

    strata: Sequence[str]
    counts: dict[str, int]


def _tune_for(
    verdicts: Sequence[Verdict], labels: Sequence[str], target: PromotionTarget,
    population: Population | None,
) -> ThresholdReport:
    """The threshold tuned for these (cross-fitted or re-fused) verdicts on their labels, on the
    population (``tune_threshold_stratified``; one stratum of every label without ``population``,
    where it is exactly ``tune_threshold``)."""
    confidence, correct = _scored(verdicts, labels)
    if population is None:
        strata: Sequence[str] = ["all"] * len(labels)
        counts = {"all": len(labels)}
    else:
        strata, counts = population.strata, population.counts
    keep, kept, counts = solicited(strata, counts)
    return tune_threshold_stratified(
        [confidence[i] for i in keep], [correct[i] for i in keep], kept, counts,
        target_precision=target.target_precision, delta=target.delta, min_count=target.min_count,
    )


def _review_load(report: ThresholdReport) -> float:
    """Share sent to review at the target: everything when no threshold qualifies."""
    return 1.0 if report.threshold is None else 1.0 - report.coverage


def promotion_problems(
    metrics: dict[str, float], candidate: ThresholdReport | None, *, voting: str,
    target: PromotionTarget | None, promote_on: PromoteOn,
) -> list[str]:
    """Why a candidate must not be promoted (empty: promote). Pure: the rule of the module
    docstring over the cross-fitted ``metrics`` (Brier and, with a target, review loads) and
    the candidate's tuned threshold report."""
    problems: list[str] = []
    if target is not None:
        if candidate is None or candidate.threshold is None:
            reason = candidate.reason if candidate is not None else "not tuned"
            problems.append(
                f"no threshold of the candidate meets precision {target.target_precision:g} "
                f"at delta {target.delta:g} ({reason}): the current model and threshold keep serving"
            )
        elif promote_on in ("both", "review_load") and (
            metrics["stacked_review_load"] > metrics["baseline_review_load"]
        ):
            problems.append(
                f"review load at the target {metrics['stacked_review_load']:.3f} is higher than "
                f"{voting}'s {metrics['baseline_review_load']:.3f}"
            )
    if promote_on in ("both", "brier") or target is None:
        # better by more than its noise, before a target exists as well as after (promotion.py)
        brier = brier_problem(metrics, voting=voting)
        if brier is not None:
            problems.append(brier)
    return problems


@dataclass
class _Evaluation:
    fitted: FusionMethod | None
    """The fitted model (None when not promoted, and in what a worker process sends back: the
    gateway stores ``params`` and never unpickles a model)."""
    metrics: dict[str, float]
    why_not: str | None
    threshold: ThresholdReport | None = None
    params: dict[str, Any] | None = None
    """The promoted model's ``to_params`` (None: not promoted)."""
    model_version: str | None = None


def _evaluate(
    batches: list[list[JudgeVote]], labels: list[str], voting: str, n_folds: int,
    target: PromotionTarget | None = None, promote_on: PromoteOn = "both",
    population: Population | None = None,
    learned: str = REFIT_METHOD,
) -> _Evaluation:
    """CPU part (worker thread): cross-fit both, tune both at the target, fit the final model
    if the candidate wins by the ``promote_on`` rule (module docstring)."""
    letters = [cast(Letter, label) for label in labels]
    voting_verdicts = [get_method(voting)(b) for b in batches]
    try:
        stacked_verdicts = cross_fit_predict(learned, batches, letters, n_folds=n_folds)
    except NotEnoughLabels as exc:
        return _Evaluation(None, {}, f"cannot cross-fit {learned} fusion: {exc}")
    metrics = {
        "stacked_brier": brier_of(stacked_verdicts, labels),
        "stacked_accuracy": accuracy_of(stacked_verdicts, labels),
        "baseline_brier": brier_of(voting_verdicts, labels),
        "baseline_accuracy": accuracy_of(voting_verdicts, labels),
        "n_labels": float(len(labels)),
        "n_folds": float(n_folds),
        **brier_evidence(_scored(stacked_verdicts, labels), _scored(voting_verdicts, labels)),
    }
    candidate: ThresholdReport | None = None
    if target is not None:
        candidate = _tune_for(stacked_verdicts, labels, target, population)
        baseline = _tune_for(voting_verdicts, labels, target, population)
        metrics["stacked_review_load"] = _review_load(candidate)
        metrics["baseline_review_load"] = _review_load(baseline)
        metrics["target_precision"] = target.target_precision
        metrics["delta"] = target.delta
    problems = promotion_problems(metrics, candidate, voting=voting, target=target, promote_on=promote_on)
    if problems:
        return _Evaluation(None, metrics, "; ".join(problems) + ": not promoted", candidate)
    unfitted = get_method(learned)  # base+recalibrator too (its factory is the base's)
    if not isinstance(unfitted, LearnedFusionMethod):
        return _Evaluation(None, metrics, f"internal error: {learned!r} has no fit()")
    final = unfitted.fit(batches, letters)
    params = method_params(final)
    restored = restore_method(learned, params)
    if not np.allclose(_p_a_of(restored, batches), _p_a_of(final, batches), atol=1e-9):
        return _Evaluation(None, metrics, "internal error: the serialised model does not reproduce the fit")
    return _Evaluation(final, metrics, None, candidate, params, _version_of(final))


async def refit(
    storage: Storage,
    tenant: str,
    panel: str,
    *,
    voting_method: str,
    min_labels: int,
    max_labels: int,
    n_folds: int,
    now: Callable[[], float] = time.time,
    target: PromotionTarget | None = None,
    promote_on: PromoteOn = "both",
    traffic: dict[str, int] | None = None,
    learned: str = REFIT_METHOD,
    bounds: RefitBounds | None = None,
    basis: int | None = None,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """Refit the learned model of (tenant, panel); see the module docstring. ``target``: what
    the promoted model's threshold must meet (None: promote on the Brier rule alone and pair
    no threshold: nothing was ever tuned for this panel). ``traffic``: N_s per review stratum
    of the panel's verdicts; with it the thresholds are tuned on the population (each label
    weighted by its stratum, as ``POST /v1/thresholds/tune`` does), without it on the labels
    as a plain sample. ``learned``: the registered method to fit (it must be refittable:
    ``ValueError`` otherwise). ``bounds``: the signal caps, the budgeted worker and one refit
    per label set (:class:`RefitBounds`); None: in a thread, uncapped (offline use). Returns the
    outcome and the fitted model when one was promoted (None from a worker process: it sends
    back the model's parameters, which are what is stored and served). ``basis``: the threshold
    version ``target`` was read from (0: none was stored; None: the latest now); a promotion
    stands only while the target in force is the one of that version (module docstring, 5)."""
    if not capabilities(learned).refittable:
        raise ValueError(
            f"fusion method {learned!r} cannot be refitted from labels (it needs requires_fit, "
            "to_params/from_params and a factory that builds without options)"
        )
    if basis is None:
        basis = (await read_pair(storage, tenant, panel)).versions.threshold
    current = await storage.get_model(tenant, panel)
    current_method = (current.method or learned) if current is not None else voting_method
    stays: dict[str, Any] = {"panel": panel, "n_labels": 0, "active_method": current_method,
             "model_version": current.params.get("model_version") if current else None,
             "version": current.version if current else None}
    job = RefitJob(storage_url=None, tenant=tenant, panel=panel, max_labels=max_labels,
                   voting=voting_method, n_folds=n_folds, target=target, promote_on=promote_on,
                   traffic=traffic, learned=learned, caps=bounds.caps if bounds is not None else None)
    url = storage.reopen_url() if bounds is not None else None
    if bounds is not None and url is not None:
        return await _refit_in_worker(storage, dataclasses.replace(job, storage_url=url), bounds,
                                      min_labels, stays, now, basis)
    records = await storage.iter_labelled(tenant, panel, limit=max_labels)
    stays["n_labels"] = n = len(records)
    if n < min_labels:
        return _too_few(stays, min_labels), None
    inputs = job.inputs(records)
    if bounds is None:
        return await _fit_and_store(storage, tenant, panel, job, stays, now=now, basis=basis,
                                    evaluate=lambda: asyncio.to_thread(evaluate_bounded, *inputs))
    workers = bounds.workers
    done = await bounds.once.run(
        tenant, panel, job.digest(records),
        functools.partial(_fit_and_store, storage, tenant, panel, job, stays, now=now, basis=basis,
                          evaluate=lambda: workers.run(evaluate_bounded, *inputs)),
        keep=lambda ran: ran[0].status != "failed",
    )
    return done if done is not None else (_refitted_already(stays), None)


def _too_few(stays: dict[str, Any], min_labels: int) -> RefitOutcome:
    n, panel, method = stays["n_labels"], stays["panel"], stays["active_method"]
    return RefitOutcome(status="skipped", **stays, reason=(
        f"{n} labelled verdicts for panel {panel!r}; at least {min_labels} are needed "
        f"to fit learned fusion: staying on {method!r}"))


def _refitted_already(stays: dict[str, Any]) -> RefitOutcome:
    return RefitOutcome(status="skipped", **stays, reason=(
        f"these {stays['n_labels']} labels were refitted already (or are being refitted by another "
        f"replica): nothing new to learn; staying on {stays['active_method']!r}"))


def _failed(tenant: str, stays: dict[str, Any], exc: RefitWorkerFailed) -> RefitOutcome:
    log.warning("refit %s/%s failed: %s", tenant, stays["panel"], exc.reason)
    return RefitOutcome(status="failed", **stays, reason=f"{exc.reason}; nothing promoted")


async def _refit_in_worker(
    storage: Storage, job: RefitJob, bounds: RefitBounds, min_labels: int, stays: dict[str, Any],
    now: Callable[[], float], basis: int,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """The worker reads the labels and names their set; the gateway decides (too few, fitted
    already, fitted here) and stores what the worker fits (module docstring)."""
    tenant, panel = job.tenant, job.panel
    async with bounds.workers.session(refit_in_worker, job) as worker:
        try:
            labelled: LabelSet = await worker.question()
        except RefitWorkerFailed as exc:
            return _failed(tenant, stays, exc), None
        stays["n_labels"] = labelled.n_labels
        if labelled.n_labels < min_labels:
            return _too_few(stays, min_labels), None
        done = await bounds.once.run(
            tenant, panel, labelled.digest,
            functools.partial(_fit_and_store, storage, tenant, panel, job, stays, now=now, basis=basis,
                              evaluate=functools.partial(_answered, worker)),
            keep=lambda ran: ran[0].status != "failed",
        )
    return done if done is not None else (_refitted_already(stays), None)


async def _answered(worker: WorkerJob) -> tuple[_Evaluation, str | None]:
    """Tell the worker to fit its label set; its evaluation."""
    evaluation: tuple[_Evaluation, str | None] = await worker.result(True)
    return evaluation


@dataclass(frozen=True)
class LabelSet:
    """What the worker tells the gateway about the labels it read: how many, and their digest
    (:func:`~judgefuse.service.learning.refit_once.label_set_digest`)."""

    n_labels: int
    digest: str


@dataclass(frozen=True)
class RefitJob:
    """A refit's input, small whatever the number of labels: where the labels are and what to
    fit on them (:func:`refit`'s arguments). ``storage_url``: the store the worker opens (None:
    the records are read by the caller and passed as :meth:`inputs`)."""

    storage_url: str | None
    tenant: str
    panel: str
    max_labels: int
    voting: str
    n_folds: int
    target: PromotionTarget | None
    promote_on: PromoteOn
    traffic: dict[str, int] | None
    learned: str
    caps: SignalCaps | None

    def digest(self, records: Sequence[VerdictRecord]) -> str:
        """The label set's name: the (verdict, label) pairs and everything asked of them."""
        return label_set_digest(records, voting=self.voting, n_folds=self.n_folds, target=self.target,
                                promote_on=self.promote_on, learned=self.learned, caps=self.caps)

    def inputs(self, records: list[VerdictRecord]) -> tuple[Any, ...]:
        """:func:`evaluate_bounded`'s arguments for these records (newest first, as read)."""
        ordered = records[::-1]  # oldest first: deterministic folds for the same data
        population = None
        if self.traffic is not None:
            population = Population([label_stratum_key(r) for r in ordered], self.traffic)
        return ([list(r.verdict.votes) for r in ordered], [str(r.label) for r in ordered], self.voting,
                self.n_folds, self.target, self.promote_on, population, self.learned, self.caps)


def refit_in_worker(job: RefitJob) -> Generator[LabelSet, bool, tuple[_Evaluation, str | None] | None]:
    """The refit worker's job: read the labelled records from the store, yield their
    :class:`LabelSet`, and, when the gateway answers True, evaluate them (:func:`evaluate_bounded`)."""
    assert job.storage_url is not None
    records = asyncio.run(_read_labelled(job.storage_url, job.tenant, job.panel, job.max_labels))
    go = yield LabelSet(len(records), job.digest(records))
    if not go:
        return None
    evaluation, capped = evaluate_bounded(*job.inputs(records))
    return dataclasses.replace(evaluation, fitted=None), capped  # the parameters travel, not the model


async def _read_labelled(url: str, tenant: str, panel: str, limit: int) -> list[VerdictRecord]:
    async with open_storage(url) as storage:
        return await storage.iter_labelled(tenant, panel, limit=limit)


async def _fit_and_store(
    storage: Storage, tenant: str, panel: str, job: RefitJob, stays: dict[str, Any], *,
    now: Callable[[], float], evaluate: Callable[[], Awaitable[tuple[_Evaluation, str | None]]],
    basis: int,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """``evaluate()`` (:func:`evaluate_bounded` in a worker process or a thread), then promote
    against the pair in force (module docstring, 5) or say why not."""
    voting_method, target, learned = job.voting, job.target, job.learned
    n = stays["n_labels"]
    try:
        evaluation, capped = await evaluate()
    except RefitWorkerFailed as exc:
        return _failed(tenant, stays, exc), None
    fitted, metrics, why_not = evaluation.fitted, evaluation.metrics, evaluation.why_not
    params, model_version = evaluation.params, evaluation.model_version
    note = f" ({capped})" if capped else ""
    if params is None:
        reason = why_not or "not promoted"
        return RefitOutcome(status="kept", **stays, reason=reason + note, metrics=metrics or None), None
    paired = None
    if target is not None and evaluation.threshold is not None:
        paired = _paired_threshold(panel, evaluation.threshold, target, model_version, n, now(), learned)
    record = ModelRecord(
        panel=panel, created_at=now(), method=learned, params=params,
        metrics={k: v for k, v in metrics.items() if math.isfinite(v)},
    )
    for _attempt in range(WRITE_ATTEMPTS):
        pair = await read_pair(storage, tenant, panel)
        moved = _target_moved(pair, basis, target)
        if moved is not None:
            return RefitOutcome(status="kept", **stays, reason=moved + note, metrics=metrics, retry=True), None
        written = await storage.put_serving(tenant, panel, expected=pair.versions, threshold=paired, model=record)
        if written is not None:
            break
    else:
        return RefitOutcome(status="kept", **stays, metrics=metrics, reason=(
            f"the panel's threshold and model kept changing while this refit stored its model "
            f"({WRITE_ATTEMPTS} tries): not promoted{note}")), None
    version = written.model
    why = f"cross-fitted {learned} Brier {metrics['stacked_brier']:.4f} vs {voting_method}'s {metrics['baseline_brier']:.4f}"
    if paired is not None:
        why += (f"; review load at precision {target.target_precision:g} "  # type: ignore[union-attr]
                f"{metrics['stacked_review_load']:.3f} vs {metrics['baseline_review_load']:.3f}; "
                f"promoted with threshold {paired.threshold:.4g} (threshold version {written.threshold})")
    return RefitOutcome(
        status="promoted", panel=panel, n_labels=n, active_method=learned,
        model_version=model_version, version=version, metrics=metrics,
        threshold_version=written.threshold if paired is not None else None,
        threshold=paired.threshold if paired is not None else None,
        reason=f"{why} on {n} labels: promoted as version {version}{note}",
    ), fitted


def _target_moved(pair: ServingPair, basis: int, target: PromotionTarget | None) -> str | None:
    """Why a decision made at ``target`` (read from threshold version ``basis``) no longer holds
    against ``pair``; None while it does: nothing tuned since, or the same target."""
    if pair.versions.threshold == basis:
        return None
    now = PromotionTarget.of(pair.threshold)
    if now == target:
        return None
    was = f"at {target}" if target is not None else "with no target"
    return (f"the target changed while this refit ran (threshold version {pair.versions.threshold} "
            f"sets {now or 'none'}; the candidate was evaluated {was}): not promoted, the serving "
            "model and threshold stay")


def evaluate_bounded(
    batches: list[list[JudgeVote]], labels: list[str], voting: str, n_folds: int,
    target: PromotionTarget | None, promote_on: PromoteOn, population: Population | None,
    learned: str, caps: SignalCaps | None,
) -> tuple[_Evaluation, str | None]:
    """The refit worker's job: the signals cut to ``caps`` (:mod:`judgefuse.service.learning.signal_caps`),
    then :func:`_evaluate`; and what the caps ignored, in words (None: nothing)."""
    note = None
    if caps is not None:
        try:
            capped = cap_signals(batches, caps)
        except TooManyFeatures as exc:
            return _Evaluation(None, {}, str(exc)), None
        batches, note = capped.batches, capped.note()
    return _evaluate(batches, labels, voting, n_folds, target, promote_on, population, learned), note


@dataclass(frozen=True)
class RefitBounds:
    """Bounded learning (docs/design.md, 'Bounded learning'): what a refit may learn from
    (``caps``), where it runs (``workers``: a budgeted process) and once per label set (``once``)."""

    caps: SignalCaps
    workers: RefitWorkers
    once: LabelSetOnce


def _p_a_of(method: FusionMethod, batches: Sequence[Sequence[JudgeVote]]) -> list[float]:
    """P(A) of every batch (one vectorised call when the method offers ``predict_p_a``)."""
    predict = getattr(method, "predict_p_a", None)
    if callable(predict):
        return [float(p) for p in predict(batches)]
    return [v.p_a for v in map(method, batches)]


def _version_of(method: FusionMethod) -> str | None:
    """A fitted method's ``model_version`` (None when it declares none)."""
    version = getattr(method, "model_version", None)
    return str(version) if version is not None else None


def _paired_threshold(
    panel: str, report: ThresholdReport, target: PromotionTarget, model_version: str | None,
    n_labels: int, created_at: float, learned: str,
) -> ThresholdRecord:
    """The candidate's threshold as a threshold record naming its model (so it applies only to
    that model's verdicts), stored with the model in one step (``Storage.put_serving``)."""
    assert report.threshold is not None
    return ThresholdRecord(
        panel=panel, threshold=report.threshold, created_at=created_at, method=learned,
        target_precision=target.target_precision, delta=target.delta, coverage=report.coverage,
        n_labels=report.n,
        details={
            "report": report.as_dict(), "model_version": model_version, "paired": True,
            "data": f"cross-fitted confidences of {learned} model {model_version} on {n_labels} labels"
                    " (weighted by review stratum)",
        },
    )


class RefitScheduler:
    """Background refits every ``every`` labels of a (tenant, panel): one per round, one at a
    time, across every replica that shares the storage.

    Counting is shared through storage: a replica's own labels are only a hint to look (every
    ``check_every`` local labels, default ``every // 4``, it reads the panel's labelled count
    from storage); the count's round is ``count // every``. To refit a round a replica must
    take, in this order, the panel's running lease ``refit/{panel}`` (``lease_s``: one refit at
    a time; renewed by no one, so a crashed replica's lease frees itself) and the round's
    marker ``refit/{panel}/round/{r}`` (held ``marker_ttl_s``: a round is refit once however many
    replicas saw it cross). Losing either means someone else has it: nothing to do. A check
    that loses the running lease leaves the round unmarked, so a later check retries it.
    Model and threshold versions come from storage's atomic counters, so they strictly increase
    whichever replica promotes; every replica serves a promotion within ``state_ttl_s`` (the
    state cache's freshness, :mod:`judgefuse.service.learning.state_cache`).

    ``runs`` lists the (tenant, panel, round) this replica refit (tests, logs).

    The same machinery runs the label-free cold start (:mod:`judgefuse.service.learning.cold_start`):
    ``count`` then counts the panel's verdicts instead of its labels and ``lease`` names its
    own leases (``cold_start/{panel}``, ``cold_start/{panel}/round/{r}``); ``note`` is
    ``note_label`` under the name that says so.
    """

    def __init__(
        self, every: int, run: Callable[[str, str], Any], *, storage: Storage, owner: str,
        check_every: int | None = None, lease_s: float = 900.0,
        marker_ttl_s: float = 30 * 86400.0, clock: Callable[[], float] = time.time,
        count: Callable[[str, str], Awaitable[int]] | None = None, lease: str = "refit",
    ) -> None:
        self._count = count or storage.count_labelled
        self.lease = lease
        self.every = every
        self.check_every = max(1, check_every if check_every is not None else every // 4)
        self.storage = storage
        self.owner = owner
        self.lease_s = lease_s
        self.marker_ttl_s = marker_ttl_s
        self.clock = clock
        self._run = run
        self._since: dict[tuple[str, str], int] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self._done: dict[tuple[str, str], int] = {}
        """The last round this replica ran per (tenant, panel)."""
        self._again: set[tuple[str, str]] = set()
        """Panels noted while their check ran: checked once more when it ends."""
        self._closed = False
        self.runs: list[tuple[str, str, int]] = []

    def note_label(self, tenant: str, panel: str) -> None:
        if self.every <= 0:
            return
        key = (tenant, panel)
        self._since[key] = self._since.get(key, 0) + 1
        if self._since[key] < self.check_every:
            return
        self._since[key] = 0
        if key in self._tasks:
            # a check is reading the count right now and may have read it before these labels
            # landed: look again when it ends, or the round they complete waits for more labels
            self._again.add(key)
            return
        self._start(key)

    note = note_label

    def _start(self, key: tuple[str, str]) -> None:
        tenant, panel = key
        task = asyncio.create_task(self._guarded(tenant, panel), name=f"{self.lease}:{tenant}:{panel}")
        self._tasks[key] = task
        task.add_done_callback(functools.partial(self._forget, key))

    def _forget(self, key: tuple[str, str], _task: asyncio.Task[Any]) -> None:
        self._tasks.pop(key, None)
        if key in self._again and not self._closed:
            self._again.discard(key)
            self._start(key)

    async def _check(self, tenant: str, panel: str) -> None:
        """Refit the current round if no replica has (the class docstring)."""
        round_ = await self._count(tenant, panel) // self.every
        if round_ < 1 or round_ <= self._done.get((tenant, panel), 0):
            # a lease's owner may take it again, so the round marker alone would let this
            # replica redo a round it already ran: it remembers its own
            return
        running = f"{self.lease}/{panel}"
        if not await self.storage.acquire_lease(tenant, running, self.owner, ttl_s=self.lease_s,
                                                now=self.clock()):
            return
        try:
            marker = f"{self.lease}/{panel}/round/{round_}"
            if not await self.storage.acquire_lease(tenant, marker, self.owner,
                                                    ttl_s=self.marker_ttl_s, now=self.clock()):
                return
            self.runs.append((tenant, panel, round_))
            self._done[(tenant, panel)] = round_
            await self._run(tenant, panel)
        finally:
            await self.storage.release_lease(tenant, running, self.owner)

    async def _guarded(self, tenant: str, panel: str) -> None:
        try:
            await self._check(tenant, panel)
        except Exception as exc:  # a background refit must never take the service down
            log.error("background %s of %s/%s failed: %s", self.lease, tenant, panel, type(exc).__name__,
                      exc_info=exc)

    async def idle(self) -> None:
        """Wait for running refits (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        self._closed = True
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)
