"""The cold start: a label-free method (Dawid-Skene) fitted on a panel's stored, unlabelled votes.

A panel configured with a method that *fits unlabelled* (``fusion: dawid_skene``; the capability
:attr:`~judgefuse.fusion.capabilities.Capabilities.cold_start`, never its name) serves, before
any fit, the method's own cold-start rule (``mean_probability``, with a note on every verdict).
Every ``settings.learning.cold_start_every_verdicts`` verdicts of the panel, the gateway's cold-start
scheduler (a :class:`~judgefuse.service.learning.refit_scheduler.RefitScheduler` counting verdicts instead of
labels, leases ``cold_start/{panel}``: one fit per round cluster-wide) calls
:func:`cold_start_fit`:

1. a model fitted from **labels** already serves (``stacked``, ``dawid_skene+platt``, ...): the
   cold start is over, nothing is fitted (the labelled refit owns the panel from then on);
2. the panel's latest threshold was tuned for this method: for the serving model's version
   (refitting would orphan it: a threshold applies to one model version), or before any fit,
   on the cold-start rule's verdicts (it names no version, so it would route the fit's far more
   confident posteriors): the method is frozen as it is until a labelled refit replaces it.
   Labels enough to tune a threshold are labels enough to end the cold start;
3. fewer than ``min_verdicts`` stored verdicts with a valid vote: too little to fit;
4. else the method is fitted (worker thread) on the votes of the newest ``window`` verdicts
   (cascade verdicts left out: they hold only the votes of the stages they reached), its
   ``to_params`` round trip is checked, and it is stored as a :class:`ModelRecord` (metrics:
   the items it saw and each judge's label-free accuracy estimate) unless the fit is the
   model already serving (same version). The gateway serves a stored model like any promoted
   one, and it survives restarts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from judgefuse.fusion import FusionMethod, get_method
from judgefuse.fusion.capabilities import capabilities, method_params, restore_method
from judgefuse.judges.types import JudgeVote
from judgefuse.service.learning.refit import RefitOutcome
from judgefuse.service.storage import ModelRecord, ServingVersions, VerdictStore, VersionedRecords

__all__ = ["cold_start_fit", "fit_label_free"]


def fit_label_free(name: str, batches: Sequence[Sequence[JudgeVote]]) -> FusionMethod:
    """CPU part (worker thread): fit ``name`` without labels and check that its parameters
    restore to the same model (``RuntimeError`` otherwise; ``ValueError`` when EM has nothing
    to fit)."""
    method = get_method(name)
    method.fit_unlabelled(batches)  # type: ignore[attr-defined]
    restored = restore_method(name, method_params(method))
    sample = list(batches[: min(len(batches), 200)])
    if not np.allclose([restored(b).p_a for b in sample], [method(b).p_a for b in sample], atol=1e-9):
        raise RuntimeError(f"internal error: the serialised {name} model does not reproduce the fit")
    return method


async def cold_start_fit(
    versioned: VersionedRecords, verdicts: VerdictStore, tenant: str, panel: str, *, method: str,
    window: int, min_verdicts: int, now: Callable[[], float] = time.time,
) -> tuple[RefitOutcome, FusionMethod | None]:
    """Fit and store the cold-start model of (tenant, panel) (the module docstring's rules):
    the serving pair read from and written to ``versioned``, the votes read from ``verdicts``
    (usually one storage, passed twice)."""
    if not capabilities(method).cold_start:
        raise ValueError(f"fusion method {method!r} is not fitted without labels (no cold start)")
    current = await versioned.get_model(tenant, panel)
    current_version = current.params.get("model_version") if current is not None else None

    def outcome(status: str, reason: str, **extra: Any) -> RefitOutcome:
        return RefitOutcome(
            status=status, panel=panel, n_labels=0, reason=reason,
            active_method=extra.pop("active", current.method if current is not None else method),
            model_version=extra.pop("model_version", current_version),
            version=extra.pop("version", current.version if current is not None else None), **extra,
        )

    if current is not None and not capabilities(current.method or method).cold_start:
        return outcome("skipped", f"{current.method!r} (fitted from labels) serves panel {panel!r}: "
                                  "the cold start is over"), None
    latest = await versioned.get_threshold(tenant, panel)
    if latest is not None and latest.method == method:
        tuned_for = latest.details.get("model_version")
        if tuned_for and tuned_for == current_version:
            return outcome("skipped", f"threshold version {latest.version} is tuned for {method} model "
                                      f"{current_version}: the model is kept (a new fit would leave the "
                                      "threshold routing nothing); refit from labels to move on"), None
        if not tuned_for:
            return outcome("skipped", f"threshold version {latest.version} was tuned on {method}'s verdicts "
                                      "before any fit (the cold-start rule's confidences) and would route a "
                                      "fit's posteriors: no fit; refit from labels to move on"), None
    try:
        records = await verdicts.iter_recent(tenant, panel, limit=window)
    except NotImplementedError as exc:
        return outcome("skipped", f"{exc}: no cold-start fit"), None
    batches = [list(r.verdict.votes) for r in reversed(records)
               if r.verdict.method != "cascade" and any(v.valid for v in r.verdict.votes)]
    if len(batches) < min_verdicts:
        return outcome("skipped", f"{len(batches)} stored verdicts with a valid vote for panel {panel!r}; "
                                  f"the {method} cold start needs at least {min_verdicts}"), None
    fitted = await asyncio.to_thread(fit_label_free, method, batches)
    version = getattr(fitted, "model_version", None)
    if current is not None and current.method == method and version == current_version:
        return outcome("kept", f"{method} refitted on {len(batches)} unlabelled verdicts is the model "
                               f"already serving (version {version})"), None
    estimated = getattr(fitted, "estimated_accuracy", {}) or {}
    metrics = {"n_items": float(len(batches)),
               **{f"estimated_accuracy:{judge}": float(acc) for judge, acc in estimated.items()}}
    record = ModelRecord(panel=panel, created_at=now(), method=method, params=method_params(fitted),
                         metrics=metrics)
    # stored against the pair its rules read: a tune or a promotion since then decides instead
    written = await versioned.put_serving(tenant, panel, model=record, expected=ServingVersions(
        (latest.version or 0) if latest is not None else 0, (current.version or 0) if current is not None else 0))
    if written is None:
        return outcome("kept", f"the threshold or model of panel {panel!r} changed while {method} was "
                               "fitted: not stored (the next round decides against what serves)"), None
    stored = written.model
    return outcome(
        "promoted", f"{method} fitted without labels on the votes of {len(batches)} stored verdicts: "
                    f"serving as version {stored}", active=method, model_version=version,
        version=stored, metrics=metrics,
    ), fitted
