"""Learned fusion from labelled traffic: fit, compare, promote (docs/design.md, 'Fusion').

:func:`refit` refits the learned model of a tenant+panel from its labelled verdicts (their
stored votes and labels):

1. fewer than ``min_labels`` labels -> stay on the voting method, say why (nothing stored);
2. the candidate is cross-fitted, compared with the voting method on the same labels, tuned at
   the **target** (the target precision and delta of the panel's latest tuned threshold) and
   judged by the promotion rule: :mod:`judgefuse.service.learning.refit_evaluation`, with the
   rule in :mod:`judgefuse.service.learning.promotion` and the candidate's threshold in
   :mod:`judgefuse.service.learning.paired_threshold`;
3. to promote, the tuned threshold (a new threshold version naming the new model version) is
   stored together with the :class:`ModelRecord` that embeds it: one record holds the pair, so
   a reader never gets the model without its threshold (:mod:`judgefuse.service.judging.routing`).
   Otherwise nothing is stored and the outcome says why, with both methods' Brier and review
   load;
4. the promotion is decided against the **target in force when it is applied**, not the one
   the job read at its start (:mod:`judgefuse.service.learning.serving_pair`): the pair is read
   again and written with one compare-and-set on both versions. A target tuned (or changed)
   since the job read it voids the decision: nothing is stored and the outcome asks to be
   run again at the new target (``retry``); a write that loses to another writer of the same
   target reads the pair again and tries again. A refit's worker may start minutes after its
   job was made (a niced process on a busy machine), and a model promoted against a target
   tuned meanwhile would serve without a threshold: every verdict would go to review as
   ``method_mismatch``.

Where it runs (docs/design.md, 'Bounded learning'): with :class:`RefitBounds`, in a budgeted
worker process that reads the labelled records itself (:mod:`judgefuse.service.learning.refit_job`).
The gateway does no per-record work for a refit: it learns the label set's size and digest from
the worker, decides whether this label set is to be fitted here
(:class:`~judgefuse.service.learning.refit_once.LabelSetOnce`), and stores what the worker returns
(the fitted model's parameters and the metrics). A store that cannot be reopened by URL in
another process is read here and the job carries its votes. Without bounds (offline use)
everything runs in a thread. :class:`~judgefuse.service.learning.refit_scheduler.RefitScheduler`
runs the automatic refits in the background.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from judgefuse.fusion import FusionMethod
from judgefuse.fusion.capabilities import REFIT_METHOD, capabilities
from judgefuse.service.learning.paired_threshold import paired_threshold
from judgefuse.service.learning.promotion import PromoteOn, PromotionTarget
from judgefuse.service.learning.refit_evaluation import Evaluation, evaluate_bounded
from judgefuse.service.learning.refit_job import LabelSet, RefitJob, answered, refit_in_worker
from judgefuse.service.learning.refit_once import LabelSetOnce
from judgefuse.service.learning.refit_worker import RefitWorkerFailed, RefitWorkers
from judgefuse.service.learning.serving_pair import WRITE_ATTEMPTS, ServingPair, read_pair
from judgefuse.service.learning.signal_caps import SignalCaps
from judgefuse.service.storage import LabelLedger, Lifecycle, ModelRecord, VersionedRecords

__all__ = ["RefitBounds", "RefitOutcome", "refit"]

log = logging.getLogger("judgefuse.service.learning.refit")


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
            "status": self.status,
            "reason": self.reason,
            "panel": self.panel,
            "n_labels": self.n_labels,
            "active_method": self.active_method,
            "model_version": self.model_version,
            "version": self.version,
            "metrics": self.metrics,
            "threshold": self.threshold,
            "threshold_version": self.threshold_version,
        }


@dataclass(frozen=True)
class RefitBounds:
    """Bounded learning (docs/design.md, 'Bounded learning'): what a refit may learn from
    (``caps``), where it runs (``workers``: a budgeted process) and once per label set (``once``)."""

    caps: SignalCaps
    workers: RefitWorkers
    once: LabelSetOnce


async def refit(
    versioned: VersionedRecords,
    labels: LabelLedger,
    lifecycle: Lifecycle,
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
    stands only while the target in force is the one of that version (module docstring, 4).
    The storage comes by contract (usually one storage, passed three times): ``versioned`` holds
    the serving pair, ``labels`` the labels, and ``lifecycle`` names the store a worker reopens."""
    if not capabilities(learned).refittable:
        raise ValueError(
            f"fusion method {learned!r} cannot be refitted from labels (it needs requires_fit, "
            "to_params/from_params and a factory that builds without options)"
        )
    if basis is None:
        basis = (await read_pair(versioned, tenant, panel)).versions.threshold
    current = await versioned.get_model(tenant, panel)
    current_method = (current.method or learned) if current is not None else voting_method
    stays: dict[str, Any] = {
        "panel": panel,
        "n_labels": 0,
        "active_method": current_method,
        "model_version": current.params.get("model_version") if current else None,
        "version": current.version if current else None,
    }
    job = RefitJob(
        storage_url=None,
        tenant=tenant,
        panel=panel,
        max_labels=max_labels,
        voting=voting_method,
        n_folds=n_folds,
        target=target,
        promote_on=promote_on,
        traffic=traffic,
        learned=learned,
        caps=bounds.caps if bounds is not None else None,
    )
    url = lifecycle.reopen_url() if bounds is not None else None
    if bounds is not None and url is not None:
        # too few labels is answered here, from a count: starting the worker to read them costs
        # seconds (a forkserver importing the fitting code), and a refit asked for early is common
        if (counted := await labels.count_labelled(tenant, panel)) < min_labels:
            stays["n_labels"] = counted
            return _too_few(stays, min_labels), None
        return await _refit_in_worker(
            versioned, dataclasses.replace(job, storage_url=url), bounds, min_labels, stays, now, basis
        )
    records = await labels.iter_labelled(tenant, panel, limit=max_labels)
    stays["n_labels"] = n = len(records)
    if n < min_labels:
        return _too_few(stays, min_labels), None
    inputs = job.inputs(records)
    if bounds is None:
        return await _fit_and_store(
            versioned,
            tenant,
            panel,
            job,
            stays,
            now=now,
            basis=basis,
            evaluate=lambda: asyncio.to_thread(evaluate_bounded, *inputs),
        )
    workers = bounds.workers
    return await _fit_once(
        versioned,
        job,
        bounds,
        job.digest(records),
        stays,
        now=now,
        basis=basis,
        evaluate=lambda: workers.run(evaluate_bounded, *inputs),
    )


def _too_few(stays: dict[str, Any], min_labels: int) -> RefitOutcome:
    n, panel, method = stays["n_labels"], stays["panel"], stays["active_method"]
    return RefitOutcome(
        status="skipped",
        **stays,
        reason=(
            f"{n} labelled verdicts for panel {panel!r}; at least {min_labels} are needed "
            f"to fit learned fusion: staying on {method!r}"
        ),
    )


def _refitted_already(stays: dict[str, Any]) -> RefitOutcome:
    return RefitOutcome(
        status="skipped",
        **stays,
        reason=(
            f"these {stays['n_labels']} labels were refitted already (or are being refitted by another "
            f"replica): nothing new to learn; staying on {stays['active_method']!r}"
        ),
    )


def _failed(tenant: str, stays: dict[str, Any], exc: RefitWorkerFailed) -> RefitOutcome:
    log.warning("refit %s/%s failed: %s", tenant, stays["panel"], exc.reason)
    return RefitOutcome(status="failed", **stays, reason=f"{exc.reason}; nothing promoted")


async def _refit_in_worker(
    storage: VersionedRecords,
    job: RefitJob,
    bounds: RefitBounds,
    min_labels: int,
    stays: dict[str, Any],
    now: Callable[[], float],
    basis: int,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """The worker reads the labels and names their set; the gateway decides (too few, fitted
    already, fitted here) and stores what the worker fits (module docstring)."""
    tenant = job.tenant
    async with bounds.workers.session(refit_in_worker, job) as worker:
        try:
            labelled: LabelSet = await worker.question()
        except RefitWorkerFailed as exc:
            return _failed(tenant, stays, exc), None
        stays["n_labels"] = labelled.n_labels
        if labelled.n_labels < min_labels:
            return _too_few(stays, min_labels), None
        return await _fit_once(
            storage,
            job,
            bounds,
            labelled.digest,
            stays,
            now=now,
            basis=basis,
            evaluate=functools.partial(answered, worker),
        )


async def _fit_once(
    storage: VersionedRecords,
    job: RefitJob,
    bounds: RefitBounds,
    digest: str,
    stays: dict[str, Any],
    *,
    now: Callable[[], float],
    basis: int,
    evaluate: Callable[[], Awaitable[tuple[Evaluation, str | None]]],
) -> tuple[RefitOutcome, FusionMethod | None]:
    """Fit and store the label set named ``digest`` unless this replica or another fits or
    fitted it already (:class:`~judgefuse.service.learning.refit_once.LabelSetOnce`); a failed
    fit may run again."""
    done = await bounds.once.run(
        job.tenant,
        job.panel,
        digest,
        functools.partial(
            _fit_and_store, storage, job.tenant, job.panel, job, stays, now=now, basis=basis, evaluate=evaluate
        ),
        keep=lambda ran: ran[0].status != "failed",
    )
    return done if done is not None else (_refitted_already(stays), None)


async def _fit_and_store(
    storage: VersionedRecords,
    tenant: str,
    panel: str,
    job: RefitJob,
    stays: dict[str, Any],
    *,
    now: Callable[[], float],
    evaluate: Callable[[], Awaitable[tuple[Evaluation, str | None]]],
    basis: int,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """``evaluate()`` (:func:`evaluate_bounded` in a worker process or a thread), then promote
    against the pair in force (module docstring, 4) or say why not."""
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
        paired = paired_threshold(panel, evaluation.threshold, target, model_version, n, now(), learned)
    record = ModelRecord(
        panel=panel,
        created_at=now(),
        method=learned,
        params=params,
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
        return RefitOutcome(
            status="kept",
            **stays,
            metrics=metrics,
            reason=(
                f"the panel's threshold and model kept changing while this refit stored its model "
                f"({WRITE_ATTEMPTS} tries): not promoted{note}"
            ),
        ), None
    version = written.model
    chose = f" ({learned}: {evaluation.described})" if evaluation.described else ""
    why = f"cross-fitted {learned} Brier {metrics['stacked_brier']:.4f} vs {voting_method}'s {metrics['baseline_brier']:.4f}"
    if paired is not None:
        why += (
            f"; review load at precision {target.target_precision:g} "  # type: ignore[union-attr]
            f"{metrics['stacked_review_load']:.3f} vs {metrics['baseline_review_load']:.3f}; "
            f"promoted with threshold {paired.threshold:.4g} (threshold version {written.threshold})"
        )
    return RefitOutcome(
        status="promoted",
        panel=panel,
        n_labels=n,
        active_method=learned,
        model_version=model_version,
        version=version,
        metrics=metrics,
        threshold_version=written.threshold if paired is not None else None,
        threshold=paired.threshold if paired is not None else None,
        reason=f"{why} on {n} labels: promoted as version {version}{note}{chose}",
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
    return (
        f"the target changed while this refit ran (threshold version {pair.versions.threshold} "
        f"sets {now or 'none'}; the candidate was evaluated {was}): not promoted, the serving "
        "model and threshold stay"
    )
