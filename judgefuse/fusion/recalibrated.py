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
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Literal, Self

import numpy as np

from judgefuse.calibration.recalibration import Recalibrator
from judgefuse.fusion.crossfit import cross_fit_predict, predict_many
from judgefuse.fusion.registry import FusionMethod, NotEnoughLabels, NotFitted, requires_fit
from judgefuse.fusion.stacking import check_labels
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote


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

    def fit(
        self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]]
    ) -> Self:
        check_labels(batches, labels, min_labels=self.min_labels)
        if requires_fit(self.base):
            template = copy.deepcopy(self.base)
            verdicts = cross_fit_predict(
                lambda: copy.deepcopy(template), batches, labels,
                n_folds=self.n_folds, seed=self.seed,
            )
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
        return self

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
            else v.model_copy(update={"method": self.name})
            for v in verdicts
        ]

    def _replace(self, verdict: Verdict, confidence: float) -> Verdict:
        return verdict.model_copy(
            update={
                "method": self.name,
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
