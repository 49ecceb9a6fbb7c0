"""A refit's CPU part (docs/design.md, 'Fusion'): cross-fit, compare, fit, serialise.

:func:`evaluate_bounded` runs in the refit's worker process (or a thread, offline), on the
labelled votes it is given:

1. the signals cut to the caps (:mod:`judgefuse.service.learning.signal_caps`);
2. cross-fitted verdicts of the learned method (:func:`~judgefuse.fusion.cross_fit_predict`,
   stratified folds) and the voting method's verdicts on the same labels; Brier and accuracy of
   each (:mod:`judgefuse.service.learning.verdict_scores`) and the paired Brier bound
   (:func:`~judgefuse.service.learning.promotion.brier_evidence`);
3. with a target, each one's threshold tuned at it and its review load
   (:mod:`judgefuse.service.learning.paired_threshold`);
4. the promotion rule (:func:`~judgefuse.service.learning.promotion.promotion_problems`); when
   the candidate wins: fit on every label, serialise (the method's ``to_params``), and check the
   round trip reproduces the fitted model's P(A) on the training votes (a guard against drift
   between a method's ``to_params`` and ``from_params``).

The learned method is any registered method that is *refittable*
(:func:`judgefuse.fusion.capabilities.capabilities`: requires a fit, saves and restores its
parameters with ``to_params``/``from_params``, builds without options); the default is
:data:`~judgefuse.fusion.capabilities.REFIT_METHOD` (``auto``: the cross-validated choice among
fusers, so step 2 cross-fits the choice itself, nested). Nothing here names it: the reasons name
``learned``, and a fitted method that says what it is (``describe()``, e.g. what ``auto`` chose)
is quoted in :attr:`Evaluation.described`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from judgefuse.calibration import ThresholdReport
from judgefuse.fusion import FusionMethod, LearnedFusionMethod, NotEnoughLabels, cross_fit_predict, get_method
from judgefuse.fusion.capabilities import REFIT_METHOD, method_params, restore_method
from judgefuse.judges.types import JudgeVote, Letter
from judgefuse.service.learning.paired_threshold import Population, review_load, tune_at_target
from judgefuse.service.learning.promotion import PromoteOn, PromotionTarget, brier_evidence, promotion_problems
from judgefuse.service.learning.signal_caps import SignalCaps, TooManyFeatures, cap_signals
from judgefuse.service.learning.verdict_scores import accuracy_of, brier_of, scored

__all__ = ["Evaluation", "evaluate_bounded"]


@dataclass
class Evaluation:
    fitted: FusionMethod | None
    """The fitted model (None when not promoted, and in what a worker process sends back: the
    gateway stores ``params`` and never unpickles a model)."""
    metrics: dict[str, float]
    why_not: str | None
    threshold: ThresholdReport | None = None
    params: dict[str, Any] | None = None
    """The promoted model's ``to_params`` (None: not promoted)."""
    model_version: str | None = None
    described: str | None = None
    """What the promoted model says of itself (its ``describe()``, e.g. the candidate ``auto``
    chose and why); None: not promoted, or a method that does not say."""


def _evaluate(
    batches: list[list[JudgeVote]],
    labels: list[str],
    voting: str,
    n_folds: int,
    target: PromotionTarget | None = None,
    promote_on: PromoteOn = "both",
    population: Population | None = None,
    learned: str = REFIT_METHOD,
) -> Evaluation:
    """Cross-fit both, tune both at the target, fit the final model if the candidate wins by the
    ``promote_on`` rule (module docstring, 2-4)."""
    letters = [cast(Letter, label) for label in labels]
    voting_verdicts = [get_method(voting)(b) for b in batches]
    try:
        stacked_verdicts = cross_fit_predict(learned, batches, letters, n_folds=n_folds)
    except NotEnoughLabels as exc:
        return Evaluation(None, {}, f"cannot cross-fit {learned} fusion: {exc}")
    metrics = {
        "stacked_brier": brier_of(stacked_verdicts, labels),
        "stacked_accuracy": accuracy_of(stacked_verdicts, labels),
        "baseline_brier": brier_of(voting_verdicts, labels),
        "baseline_accuracy": accuracy_of(voting_verdicts, labels),
        "n_labels": float(len(labels)),
        "n_folds": float(n_folds),
        **brier_evidence(scored(stacked_verdicts, labels), scored(voting_verdicts, labels)),
    }
    candidate: ThresholdReport | None = None
    if target is not None:
        candidate = tune_at_target(stacked_verdicts, labels, target, population)
        baseline = tune_at_target(voting_verdicts, labels, target, population)
        metrics["stacked_review_load"] = review_load(candidate)
        metrics["baseline_review_load"] = review_load(baseline)
        metrics["target_precision"] = target.target_precision
        metrics["delta"] = target.delta
    problems = promotion_problems(
        metrics, candidate, voting=voting, target=target, promote_on=promote_on, learned=learned
    )
    if problems:
        return Evaluation(None, metrics, "; ".join(problems) + ": not promoted", candidate)
    unfitted = get_method(learned)  # base+recalibrator too (its factory is the base's)
    if not isinstance(unfitted, LearnedFusionMethod):
        return Evaluation(None, metrics, f"internal error: {learned!r} has no fit()")
    final = unfitted.fit(batches, letters)
    params = method_params(final)
    restored = restore_method(learned, params)
    if not np.allclose(_p_a_of(restored, batches), _p_a_of(final, batches), atol=1e-9):
        return Evaluation(None, metrics, "internal error: the serialised model does not reproduce the fit")
    return Evaluation(final, metrics, None, candidate, params, _version_of(final), _described(final))


def evaluate_bounded(
    batches: list[list[JudgeVote]],
    labels: list[str],
    voting: str,
    n_folds: int,
    target: PromotionTarget | None,
    promote_on: PromoteOn,
    population: Population | None,
    learned: str,
    caps: SignalCaps | None,
) -> tuple[Evaluation, str | None]:
    """The refit worker's job: the signals cut to ``caps`` (:mod:`judgefuse.service.learning.signal_caps`),
    then :func:`_evaluate`; and what the caps ignored, in words (None: nothing)."""
    note = None
    if caps is not None:
        try:
            capped = cap_signals(batches, caps)
        except TooManyFeatures as exc:
            return Evaluation(None, {}, str(exc)), None
        batches, note = capped.batches, capped.note()
    return _evaluate(batches, labels, voting, n_folds, target, promote_on, population, learned), note


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


def _described(method: FusionMethod) -> str | None:
    """A fitted method's own account of itself (``describe()``; None when it offers none or it is empty)."""
    describe = getattr(method, "describe", None)
    text = describe() if callable(describe) else None
    return str(text) if text else None
