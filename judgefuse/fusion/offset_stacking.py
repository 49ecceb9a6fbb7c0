"""Stacking that starts where the cold-start rule is: the rule's log-odds as an offset.

Why (docs/design.md, 'Fusion'): plain ``stacked`` fits every weight from scratch. On small real
panels (50-200 labels) its cross-fitted Brier is worse than the label-free
``mean_probability`` it should improve on, so the service never promotes it: the model has more
freedom than its labels support. Here the default *is* the rule, and the labels only learn a
correction:

    logit P(A) = (1 + s) * o(votes) + b + w . x(votes)

* ``o`` is the log-odds of ``mean_probability``'s P(A) (the mean of the votes' ``p_a``), clipped
  like every log-odds (``P_CLIP``); 0 when no vote carries one;
* ``x`` are ``stacked``'s per-judge features (signed log-odds, missing, invalid and tie flags,
  the vote's direction, standardised signals:
  :class:`~judgefuse.fusion.stacking.StackedFusion`), in the model's saved feature set;
* ``s`` rescales the rule's own log-odds (a temperature: Trust-or-Escalate's judges put some
  items at log-odds +-9 that a learned correction could not otherwise undo);
* ``b``, ``s`` and ``w`` are fitted by L2-penalised logistic regression (Newton steps, the
  offset held fixed), all shrunk toward 0, i.e. toward the rule: ``s`` and ``w`` with the
  penalty ``lam``, ``b`` with ``max(lam, INTERCEPT_FLOOR)``. An unpenalised intercept was the
  main cost on small panels whose rule is already calibrated (Trust-or-Escalate, 50 labels: a
  few items in the rule's middle range decide it, and a subset's chance label skew moved it by
  up to 1 in log-odds);
* ``lam`` is chosen by inner cross-validation (stratified folds, per-item log-loss) from
  :data:`PENALTIES`, whose first entry ``inf`` is *exactly* the rule (``b = 0``, ``w = 0``), with
  a standard-error rule: the most regularised candidate whose held-out loss is within
  :data:`SE_RULE` (1.5) standard errors (of its paired per-item difference) of the best one's.
  So a correction is taken only when the labels show it helps by more than the noise of the
  choice.

So with few or uninformative labels the fit *is* ``mean_probability`` (its probabilities, up
to the log-odds clip); with more labels the correction grows as far as held-out log-loss says
it helps. ``model_version`` digests the chosen penalty and the coefficients.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Self

import numpy as np
from numpy.typing import NDArray

from judgefuse.fusion.registry import NotFitted, fusion_method
from judgefuse.fusion.stacking import P_CLIP, StackedFusion, check_labels, row_dot
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote

__all__ = ["PENALTIES", "RULE", "OffsetStackedFusion", "choose_penalty", "fit_offset_logistic", "penalty_search_rows"]

PARAMS_FORMAT = "judgefuse.offset_stacked/1"
RULE = math.inf
"""The penalty that means "no correction": the fit is the cold-start rule itself."""
PENALTIES = (RULE, 1e4, 300.0, 100.0, 30.0, 10.0, 3.0, 1.0)
"""L2 penalties the inner cross-validation chooses from, most regularised first."""
INTERCEPT_FLOOR = 30.0
"""The intercept's penalty is ``max(lam, INTERCEPT_FLOOR)``: a shift of the rule's log-odds
is the least-supported correction on small panels (module docstring)."""
INNER_FOLDS = 5
PENALTY_SEARCH_ROWS = 10_000
"""At most this many labelled items choose the penalty (evenly spaced ones when there are more,
:func:`penalty_search_rows`); the fit at the chosen penalty uses every item. The inner
cross-validation fits 35 models (7 finite penalties x 5 folds) and was most of ``eval``'s time at
10^5 items and more; what it decides, how far the labels support a correction to the rule, is
measured well enough on 10,000 labels (benchmarks/results/penalty_search_cap.txt compares the
capped choice with the full one). Every fit on at most 10,000 labels is unchanged."""
SE_RULE = 1.5
"""How many standard errors a less regularised candidate must gain to be chosen (1.0, the
textbook one-SE rule, still lost 0.0012 +- 0.0010 of Brier to the rule on Trust-or-Escalate
at 50 labels; 1.5: +0.0005 +- 0.0007, at a cost of a few thousandths where the correction
helps: benchmarks/bench_stacking_curves.py)."""


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -35.0, 35.0)))


def fit_offset_logistic(
    x: NDArray[np.float64],
    y: NDArray[np.float64],
    offset: NDArray[np.float64],
    lam: float,
    *,
    intercept_penalty: float | None = None,
    iterations: int = 50,
) -> tuple[float, NDArray[np.float64]]:
    """(intercept, weights) minimising the log-loss of ``sigmoid(offset + b + x w)`` plus
    ``lam / 2 * |w|^2 + intercept_penalty / 2 * b^2`` (Newton's method; ``intercept_penalty``
    defaults to ``max(lam, INTERCEPT_FLOOR)``). ``lam = inf`` is the rule: (0, zeros).

    A Newton step that would raise the penalised loss is halved until it does not: where the
    labels nearly separate (Trust-or-Escalate's rule log-odds of +-9 at penalties 1 and 3), full
    steps grow to 10^3 and the fit diverges, its held-out log-loss 10 nats above the rule's.
    Where full steps converge they are all taken, so those fits are plain Newton fits."""
    n, d = x.shape
    if math.isinf(lam):
        return 0.0, np.zeros(d)
    design = np.hstack([np.ones((n, 1)), x])
    penalty = np.full(d + 1, lam)
    penalty[0] = max(lam, INTERCEPT_FLOOR) if intercept_penalty is None else intercept_penalty
    beta = np.zeros(d + 1)
    loss = penalised_loss(offset + design @ beta, y, penalty, beta)
    for _ in range(iterations):
        p = _sigmoid(offset + design @ beta)
        gradient = design.T @ (p - y) + penalty * beta
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + np.diag(penalty)
        step = np.linalg.solve(hessian, gradient)
        for _halving in range(60):
            trial = penalised_loss(offset + design @ (beta - step), y, penalty, beta - step)
            if trial <= loss + LOSS_TOLERANCE * (1.0 + abs(loss)):
                break
            step = step / 2.0
        beta -= step
        loss = trial
        if float(np.abs(step).max()) < 1e-10:
            break
    return float(beta[0]), beta[1:]


LOSS_TOLERANCE = 1e-12
"""A step is halved only when the penalised loss rises by more than this (relative): rounding
near the optimum never shortens a step."""


def penalised_loss(
    z: NDArray[np.float64], y: NDArray[np.float64], penalty: NDArray[np.float64], beta: NDArray[np.float64]
) -> float:
    """The log-loss of ``sigmoid(z)`` summed, plus ``penalty / 2 * beta^2`` summed."""
    return float(np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * float(penalty @ (beta * beta)))


def _log_losses(y: NDArray[np.float64], p: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-item log-loss."""
    p = np.clip(p, 1e-12, 1.0 - 1e-12)
    return -(y * np.log(p) + (1.0 - y) * np.log1p(-p))


def _inner_folds(y: NDArray[np.float64], k: int) -> list[NDArray[np.int64]]:
    """Deterministic stratified folds (each class dealt round-robin in input order)."""
    fold = np.empty(y.size, dtype=np.int64)
    for cls in (0.0, 1.0):
        members = np.flatnonzero(y == cls)
        fold[members] = np.arange(members.size) % k
    return [np.flatnonzero(fold == f) for f in range(k)]


sigmoid = _sigmoid
log_losses = _log_losses
inner_folds = _inner_folds
"""Public names of the three helpers above, for the columnar fit (:mod:`.columnar_stacking`)."""


def held_out_losses(
    x: NDArray[np.float64], y: NDArray[np.float64], offset: NDArray[np.float64]
) -> dict[float, NDArray[np.float64]] | None:
    """Each penalty's per-item inner cross-validated log-loss (None: too few of a class to fold)."""
    k = min(INNER_FOLDS, int(min(y.sum(), y.size - y.sum())))
    if k < 2:
        return None
    folds = _inner_folds(y, k)
    out = {}
    for lam in PENALTIES:
        losses = np.empty(y.size)
        for held in folds:
            train = np.setdiff1d(np.arange(y.size), held)
            b, w = fit_offset_logistic(x[train], y[train], offset[train], lam)
            losses[held] = _log_losses(y[held], _sigmoid(offset[held] + b + x[held] @ w))
        out[lam] = losses
    return out


def penalty_search_rows(n: int) -> NDArray[np.int64] | None:
    """The items (of ``n`` labelled ones) the penalty search runs on: None for all of them, up to
    :data:`PENALTY_SEARCH_ROWS`; else every ``ceil(n / PENALTY_SEARCH_ROWS)``-th item from the
    first (deterministic, so a refit on the same labels chooses the same penalty)."""
    if n <= PENALTY_SEARCH_ROWS:
        return None
    return np.arange(0, n, -(-n // PENALTY_SEARCH_ROWS), dtype=np.int64)


def choose_penalty(x: NDArray[np.float64], y: NDArray[np.float64], offset: NDArray[np.float64]) -> float:
    """The most regularised penalty of :data:`PENALTIES` whose inner cross-validated log-loss is
    within :data:`SE_RULE` standard errors of the best one's (the SE of the paired per-item difference);
    :data:`RULE` when the labels cannot be folded. Past :data:`PENALTY_SEARCH_ROWS` labels, on
    the items :func:`penalty_search_rows` picks."""
    rows = penalty_search_rows(y.size)
    if rows is not None:
        x, y, offset = x[rows], y[rows], offset[rows]
    return penalty_from_losses(held_out_losses(x, y, offset))


def penalty_from_losses(losses: dict[float, NDArray[np.float64]] | None) -> float:
    """:func:`choose_penalty`'s choice from each penalty's per-item held-out log-loss."""
    if losses is None:
        return RULE
    best = min(PENALTIES, key=lambda lam: float(losses[lam].mean()))
    for lam in PENALTIES:  # most regularised first; ``best`` itself always qualifies
        diff = losses[lam] - losses[best]
        if float(diff.mean()) <= SE_RULE * float(diff.std(ddof=1)) / math.sqrt(diff.size):
            return lam
    return best


def rule_logodds(batches: Sequence[Sequence[JudgeVote]]) -> NDArray[np.float64]:
    """The cold-start rule's log-odds per item: logit of the mean ``p_a`` (0 when none carries one)."""
    out = np.zeros(len(batches))
    for i, votes in enumerate(batches):
        carried = [v.p_a for v in votes if v.p_a is not None]
        if carried:
            p = min(max(math.fsum(carried) / len(carried), P_CLIP), 1.0 - P_CLIP)
            out[i] = math.log(p) - math.log1p(-p)
    return out


@fusion_method("offset_stacked")
class OffsetStackedFusion(StackedFusion):
    """``stacked``'s features learning a correction to ``mean_probability`` (module docstring)."""

    def __init__(self, *, min_labels: int = 10, use_signals: bool = True, name: str = "offset_stacked"):
        super().__init__(min_labels=min_labels, use_signals=use_signals, name=name)
        self.penalty: float | None = None
        self._intercept = 0.0
        self._scale = 0.0
        self._weights: NDArray[np.float64] = np.zeros(0)

    @property
    def fitted(self) -> bool:
        return self.penalty is not None

    def fit(self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]]) -> Self:
        y = check_labels(batches, labels, min_labels=self.min_labels, min_per_class=1).astype(float)
        self._freeze_features(batches)
        offset = rule_logodds(batches)
        x = np.hstack([offset[:, None], self._matrix(batches)[0]])
        penalty = choose_penalty(x, y, offset)
        intercept, coef = fit_offset_logistic(x, y, offset, penalty)
        self.adopt_offset(penalty, intercept, float(coef[0]), coef[1:])
        return self

    def adopt_offset(self, penalty: float, intercept: float, scale: float, weights: NDArray[np.float64]) -> None:
        """Take a fit (on the frozen features, :meth:`freeze`) and version it: the end of
        :meth:`fit`, and of a fit made over arrays (:func:`~judgefuse.fusion.columnar_stacking.fit_method`)."""
        self.penalty, self._intercept, self._scale, self._weights = penalty, intercept, scale, weights
        digest = hashlib.sha256()
        digest.update(("\n".join(self.feature_names) + f"\n{self.penalty!r}").encode())
        digest.update(np.round(self._weights, 10).tobytes() + np.round([self._intercept, self._scale], 10).tobytes())
        digest.update(np.round(self._mean, 10).tobytes() + np.round(self._std, 10).tobytes())
        self.model_version = digest.hexdigest()[:12]

    @property
    def coefficients(self) -> dict[str, float]:
        if self.penalty is None:
            raise NotFitted(f"{self.name} is not fitted")
        out = dict(zip(self.feature_names, map(float, self._weights), strict=True))
        out["rule_scale"] = self._scale
        out["intercept"] = self._intercept
        return out

    def predict_p_a(self, batches: Sequence[Sequence[JudgeVote]]) -> NDArray[np.float64]:
        if self.penalty is None:
            raise NotFitted(f"{self.name} must be fitted before use")
        return self._p_a(batches, self._matrix(batches)[0])

    def _p_a(self, batches: Sequence[Sequence[JudgeVote]], x: NDArray[np.float64]) -> NDArray[np.float64]:
        linear = x @ self._weights if self.feature_set < 2 else row_dot(x, self._weights)  # as StackedFusion
        return _sigmoid((1.0 + self._scale) * rule_logodds(batches) + self._intercept + linear)

    def predict(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
        if self.penalty is None:
            raise NotFitted(f"{self.name} must be fitted before use")
        x, notes = self._matrix(batches)
        probs = self._p_a(batches, x)
        return [self._verdict(batch, float(p), n) for batch, p, n in zip(batches, probs, notes, strict=True)]

    def to_params(self) -> dict[str, Any]:
        penalty = None if self.penalty is None or math.isinf(self.penalty) else self.penalty
        return {"format": PARAMS_FORMAT, "penalty": penalty, "rule_scale": self._scale, **self._feature_params()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> OffsetStackedFusion:
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown offset_stacked model format {params.get('format')!r}")
        model = cls(min_labels=int(params["min_labels"]), use_signals=bool(params["use_signals"]))
        model._weights = model._restore_features(params)
        model._intercept = float(params["intercept"])
        model._scale = float(params.get("rule_scale", 0.0))  # absent: saved before the scale existed
        model.penalty = RULE if params["penalty"] is None else float(params["penalty"])
        return model

    def __repr__(self) -> str:
        state = f"fitted {self.model_version} (penalty {self.penalty:g})" if self.penalty is not None else "unfitted"
        return f"OffsetStackedFusion({state})"
