"""Recalibration of any fusion method's confidence, fitted on labelled traffic.

``Recalibrated(base, recalibrator)`` is a learned method named ``"<base>+<recalibrator>"``
(e.g. ``majority+isotonic``). ``fit`` runs the base on every batch and fits the recalibrator on
(verdict confidence, verdict correct). When the base itself is learned (e.g. ``stacked``), the
recalibrator is fitted on the base's *cross-fitted* verdicts (so it sees honest, out-of-sample
confidences) and the base is then refitted on all the data. Verdicts without a choice are left
out of the recalibration fit (their confidence 0.5 carries no information).

At call time the base verdict keeps its choice; its confidence is replaced by the recalibrated
one, ``p_a`` is recomputed (confidence for A, 1 - confidence for B), the method name becomes
``"<base>+<recalibrator>"`` and a note records the raw confidence. A base verdict with no choice
is passed through unchanged (with the new method name).

A fitted ``Recalibrated`` saves its state (``to_params``: the base's own parameters when it has
any, e.g. ``stacked`` or ``dawid_skene``, else just the base's name, plus the recalibrator's) and
:meth:`Recalibrated.from_params` rebuilds it, so the service can refit, store and serve
``<base>+<recalibrator>`` like any learned method. ``model_version`` is a digest of those
parameters (the base's version alone would not change when only the recalibrator does); every
verdict is stamped with it.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

import numpy as np

from judgefuse.calibration.recalibration import Recalibrator, recalibrator_params, restore_recalibrator
from judgefuse.fusion.crossfit import cross_fit_predict, predict_many
from judgefuse.fusion.registry import (
    FusionMethod,
    NotEnoughLabels,
    NotFitted,
    factory_of,
    get_method,
    recalibration_wrapper,
    requires_fit,
)
from judgefuse.fusion.stacking import check_labels
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote

PARAMS_FORMAT = "recalibrated/v1"
"""The ``format`` tag of :meth:`Recalibrated.to_params` output."""


@recalibration_wrapper  # what get_method("base+recalibrator") builds
class Recalibrated:
    """A base fusion method whose confidence is mapped through a fitted recalibrator."""

    requires_fit = True

    def __init__(
        self,
        base: FusionMethod,
        recalibrator: Recalibrator,
        *,
        min_labels: int = 10,
        n_folds: int = 5,
        seed: int = 0,
    ):
        self.base = base
        self.recalibrator = recalibrator
        self.name = f"{base.name}+{getattr(recalibrator, 'name', type(recalibrator).__name__)}"
        self.min_labels = min_labels
        self.n_folds = n_folds
        self.seed = seed
        self.fitted = False
        self.model_version: str | None = None

    def fit(
        self,
        batches: Sequence[Sequence[JudgeVote]],
        labels: Sequence[Literal["A", "B"]],
        *,
        cross_fitted: Sequence[Verdict] | None = None,
    ) -> Self:
        """Fit (module docstring). ``cross_fitted``: a learned base's cross-fitted verdicts on
        ``batches`` when the caller has them already (the same ``n_folds`` and ``seed``, e.g.
        :class:`~judgefuse.fusion.auto.AutoFusion`, which made them to choose this method): they
        are what this fit would compute, so they are not computed again."""
        check_labels(batches, labels, min_labels=self.min_labels)
        if cross_fitted is not None and len(cross_fitted) != len(batches):
            raise ValueError(f"{len(cross_fitted)} cross-fitted verdicts for {len(batches)} batches")
        if requires_fit(self.base):
            if cross_fitted is None:
                template = copy.deepcopy(self.base)
                cross_fitted = cross_fit_predict(
                    lambda: copy.deepcopy(template), batches, labels,
                    n_folds=self.n_folds, seed=self.seed,
                )
            verdicts = list(cross_fitted)
            self.base.fit(batches, labels)  # type: ignore[attr-defined]
        else:
            verdicts = predict_many(self.base, batches)
        pairs = [
            (v.confidence, float(v.choice == label))
            for v, label in zip(verdicts, labels, strict=True)
            if v.choice is not None
        ]
        if len(pairs) < self.min_labels:
            raise NotEnoughLabels(
                f"only {len(pairs)} decided verdicts to recalibrate on; "
                f"at least {self.min_labels} are needed"
            )
        conf, correct = np.array(pairs, dtype=float).T
        self.recalibrator.fit(conf, correct)
        self.fitted = True
        self.model_version = self._version()
        return self

    # -- parameters to save and restore ---------------------------------------------------------

    def _state(self) -> dict[str, Any]:
        to_params = getattr(self.base, "to_params", None)
        base_params = to_params() if callable(to_params) and (requires_fit(self.base) or getattr(
            self.base, "fitted", False)) else None
        return {
            "format": PARAMS_FORMAT, "base": self.base.name, "base_params": base_params,
            "recalibrator": getattr(self.recalibrator, "name", type(self.recalibrator).__name__),
            "recalibrator_params": recalibrator_params(self.recalibrator),
            "min_labels": self.min_labels, "n_folds": self.n_folds, "seed": self.seed,
        }

    def _version(self) -> str:
        """Digest of the base (its own ``model_version``, or its name) and the recalibrator's
        parameters: stable through a save and restore."""
        state = self._state()
        state["base_params"] = getattr(self.base, "model_version", None)
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:12]

    def to_params(self) -> dict[str, Any]:
        """JSON-ready parameters (``NotFitted`` before ``fit``); :meth:`from_params` rebuilds."""
        if not self.fitted:
            raise NotFitted(f"{self.name} must be fitted before its parameters are saved")
        return {**self._state(), "model_version": self.model_version}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Recalibrated:
        """A fitted method from :meth:`to_params` output. The base is restored from its own
        parameters (its factory's ``from_params``) or, without any, built by name (a voting
        method). ``ValueError`` for another format or a base that cannot be rebuilt."""
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown recalibrated model format {params.get('format')!r}")
        base_name = str(params["base"])
        base_params = params.get("base_params")
        if base_params is not None:
            from_params = getattr(factory_of(base_name), "from_params", None)
            if not callable(from_params):
                raise ValueError(f"base {base_name!r} has parameters but no from_params")
            base: FusionMethod = from_params(base_params)
        else:
            base = get_method(base_name)
            if requires_fit(base):
                raise ValueError(f"base {base_name!r} must be fitted but no parameters were saved")
        recal = restore_recalibrator(str(params["recalibrator"]), dict(params["recalibrator_params"]))
        method = cls(base, recal, min_labels=int(params["min_labels"]),
                     n_folds=int(params["n_folds"]), seed=int(params["seed"]))
        method.fitted = True
        method.model_version = method._version()
        return method

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        return self.predict([votes])[0]

    def predict(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
        """A recalibrated verdict per batch (one recalibrator call for all of them)."""
        if not self.fitted:
            raise NotFitted(f"{self.name} must be fitted before use")
        verdicts = predict_many(self.base, batches)
        decided = [v.confidence for v in verdicts if v.choice is not None]
        mapped = iter(
            np.clip(self.recalibrator.transform(np.array(decided, dtype=float)), 0.0, 1.0).tolist()
            if decided
            else []
        )
        return [
            self._replace(v, next(mapped)) if v.choice is not None
            else v.model_copy(update={"method": self.name, "model_version": self.model_version})
            for v in verdicts
        ]

    def _replace(self, verdict: Verdict, confidence: float) -> Verdict:
        return verdict.model_copy(
            update={
                "method": self.name,
                "model_version": self.model_version,
                "confidence": confidence,
                "p_a": confidence if verdict.choice == "A" else 1.0 - confidence,
                "notes": [
                    *verdict.notes,
                    f"confidence recalibrated by {self.recalibrator.name}: "
                    f"{verdict.confidence:.4f} -> {confidence:.4f}",
                ],
            }
        )

    def __repr__(self) -> str:
        return f"Recalibrated({self.base!r}, {self.recalibrator!r})"
