"""Learned fusion from labelled traffic: fit, compare, promote, serialise (DESIGN.md "Fusion").

:func:`refit` reads the tenant+panel's labelled verdicts (their stored votes and labels):

1. fewer than ``min_labels`` labels -> stay on the voting method, say why (nothing stored);
2. cross-fitted stacked verdicts (:func:`~judgefuse.fusion.cross_fit_predict`, stratified
   folds) and the voting method's verdicts on the same labels; Brier of each (an undecided
   verdict counts as confidence 0.5, wrong);
3. **promote** only when the stacked Brier <= the voting Brier: fit on every label, serialise
   (:func:`stacked_to_params`), check the round trip reproduces the fitted model's P(A) on
   the training votes, store a :class:`ModelRecord` (versioned). Otherwise nothing is stored
   and the response says why.

``StackedFusion`` has no to_dict/from_dict, so the (de)serialisation lives here: it uses the
public attributes (judges, signal_keys, feature_names, coefficients, model_version, C,
use_signals) plus the signal standardisation (``_mean``/``_std``) and sets the fitted
``LogisticRegression`` on a fresh instance. The round-trip check guards against drift in
``StackedFusion``'s internals.

CPU-heavy steps run in a worker thread (``asyncio.to_thread``) so requests are never blocked
on the event loop; :class:`RefitScheduler` runs the automatic refits in the background.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from judgefuse.fusion import NotEnoughLabels, StackedFusion, cross_fit_predict, get_method
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.storage import ModelRecord, Storage

__all__ = [
    "RefitOutcome",
    "RefitScheduler",
    "refit",
    "restore_stacked",
    "stacked_to_params",
]

log = logging.getLogger("judgefuse.service.refit")

PARAMS_FORMAT = "judgefuse.stacked/1"


def stacked_to_params(model: StackedFusion) -> dict[str, Any]:
    """JSON-ready parameters of a fitted :class:`StackedFusion`."""
    coefficients = model.coefficients  # raises NotFitted when unfitted
    mean = getattr(model, "_mean", np.zeros(0))
    std = getattr(model, "_std", np.ones(0))
    return {
        "format": PARAMS_FORMAT,
        "C": model.C,
        "use_signals": model.use_signals,
        "min_labels": model.min_labels,
        "judges": list(model.judges),
        "signal_keys": [list(k) for k in model.signal_keys],
        "feature_names": list(model.feature_names),
        "coef": [coefficients[name] for name in model.feature_names],
        "intercept": coefficients["intercept"],
        "signal_mean": [float(x) for x in np.asarray(mean)],
        "signal_std": [float(x) for x in np.asarray(std)],
        "model_version": model.model_version,
    }


def restore_stacked(params: dict[str, Any]) -> StackedFusion:
    """A ready :class:`StackedFusion` from :func:`stacked_to_params` output."""
    if params.get("format") != PARAMS_FORMAT:
        raise ValueError(f"unknown stacked model format {params.get('format')!r}")
    from sklearn.linear_model import LogisticRegression

    model = StackedFusion(
        C=float(params["C"]), min_labels=int(params["min_labels"]),
        use_signals=bool(params["use_signals"]),
    )
    model.judges = list(params["judges"])
    model.signal_keys = [tuple(k) for k in params["signal_keys"]]  # type: ignore[misc]
    model.feature_names = list(params["feature_names"])
    model.model_version = params["model_version"]
    model._mean = np.asarray(params["signal_mean"], dtype=float)
    model._std = np.asarray(params["signal_std"], dtype=float)
    coef = np.asarray(params["coef"], dtype=float)
    if coef.size != len(model.feature_names):
        raise ValueError("stacked model: coefficient count does not match the feature names")
    lr = LogisticRegression(C=model.C)
    lr.coef_ = coef.reshape(1, -1)
    lr.intercept_ = np.asarray([float(params["intercept"])])
    lr.classes_ = np.asarray([0, 1])
    lr.n_features_in_ = coef.size
    model._model = lr
    return model


def brier_of(verdicts: Sequence[Verdict], labels: Sequence[str]) -> float:
    total = 0.0
    for verdict, label in zip(verdicts, labels, strict=True):
        if verdict.choice is None:
            total += 0.25
        else:
            z = 1.0 if verdict.choice == label else 0.0
            total += (verdict.confidence - z) ** 2
    return total / len(labels)


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

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "panel": self.panel,
            "n_labels": self.n_labels, "active_method": self.active_method,
            "model_version": self.model_version, "version": self.version,
            "metrics": self.metrics,
        }


def _evaluate(
    batches: list[list[JudgeVote]], labels: list[str], voting: str, n_folds: int
) -> tuple[StackedFusion | None, dict[str, float], str | None]:
    """CPU part (worker thread): cross-fit both, fit the final model if it wins."""
    voting_verdicts = [get_method(voting)(b) for b in batches]
    try:
        stacked_verdicts = cross_fit_predict(StackedFusion, batches, labels, n_folds=n_folds)
    except NotEnoughLabels as exc:
        return None, {}, f"cannot cross-fit stacked fusion: {exc}"
    metrics = {
        "stacked_brier": brier_of(stacked_verdicts, labels),
        "stacked_accuracy": accuracy_of(stacked_verdicts, labels),
        "baseline_brier": brier_of(voting_verdicts, labels),
        "baseline_accuracy": accuracy_of(voting_verdicts, labels),
        "n_labels": float(len(labels)),
        "n_folds": float(n_folds),
    }
    if metrics["stacked_brier"] > metrics["baseline_brier"]:
        return None, metrics, (
            f"cross-fitted stacked Brier {metrics['stacked_brier']:.4f} is worse than "
            f"{voting}'s {metrics['baseline_brier']:.4f}: not promoted"
        )
    final = StackedFusion().fit(batches, labels)  # type: ignore[arg-type]
    restored = restore_stacked(stacked_to_params(final))
    if not np.allclose(restored.predict_p_a(batches), final.predict_p_a(batches), atol=1e-9):
        return None, metrics, "internal error: the serialised model does not reproduce the fit"
    return final, metrics, None


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
) -> tuple[RefitOutcome, StackedFusion | None]:
    """Refit the stacked model of (tenant, panel); see the module docstring."""
    records = await storage.iter_labelled(tenant, panel, limit=max_labels)
    n = len(records)
    current = await storage.get_model(tenant, panel)
    current_method = "stacked" if current is not None else voting_method
    if n < min_labels:
        return RefitOutcome(
            status="skipped", panel=panel, n_labels=n, active_method=current_method,
            model_version=current.params.get("model_version") if current else None,
            version=current.version if current else None,
            reason=(
                f"{n} labelled verdicts for panel {panel!r}; at least {min_labels} are needed "
                f"to fit learned fusion: staying on {current_method!r}"
            ),
        ), None
    records.reverse()  # oldest first: deterministic folds for the same data
    batches = [list(r.verdict.votes) for r in records]
    labels = [str(r.label) for r in records]
    fitted, metrics, why_not = await asyncio.to_thread(
        _evaluate, batches, labels, voting_method, n_folds
    )
    if fitted is None:
        return RefitOutcome(
            status="kept", panel=panel, n_labels=n, active_method=current_method,
            model_version=current.params.get("model_version") if current else None,
            version=current.version if current else None,
            reason=why_not or "not promoted", metrics=metrics or None,
        ), None
    record = ModelRecord(
        panel=panel, created_at=now(), method="stacked", params=stacked_to_params(fitted),
        metrics={k: v for k, v in metrics.items() if math.isfinite(v)},
    )
    version = await storage.put_model(tenant, panel, record)
    return RefitOutcome(
        status="promoted", panel=panel, n_labels=n, active_method="stacked",
        model_version=fitted.model_version, version=version, metrics=metrics,
        reason=(
            f"cross-fitted stacked Brier {metrics['stacked_brier']:.4f} <= {voting_method}'s "
            f"{metrics['baseline_brier']:.4f} on {n} labels: promoted as version {version}"
        ),
    ), fitted


class RefitScheduler:
    """Background refits every ``every`` new labels per (tenant, panel); one at a time each.

    A refit runs as an ``asyncio`` task whose CPU work is in a thread: a request never waits
    for it. Counting is per process (with several replicas each may refit; promotion is still
    guarded by the held-out comparison and storage versions every model).
    """

    def __init__(self, every: int, run: Callable[[str, str], Any]) -> None:
        self.every = every
        self._run = run
        self._since: dict[tuple[str, str], int] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[Any]] = {}

    def note_label(self, tenant: str, panel: str) -> None:
        if self.every <= 0:
            return
        key = (tenant, panel)
        self._since[key] = self._since.get(key, 0) + 1
        if self._since[key] >= self.every and key not in self._tasks:
            self._since[key] = 0
            task = asyncio.create_task(self._guarded(tenant, panel), name=f"refit:{tenant}:{panel}")
            self._tasks[key] = task
            task.add_done_callback(lambda _t, k=key: self._tasks.pop(k, None))

    async def _guarded(self, tenant: str, panel: str) -> None:
        try:
            await self._run(tenant, panel)
        except Exception as exc:  # a background refit must never take the service down
            log.error("background refit of %s/%s failed: %s", tenant, panel, type(exc).__name__,
                      exc_info=exc)

    async def idle(self) -> None:
        """Wait for running refits (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)
