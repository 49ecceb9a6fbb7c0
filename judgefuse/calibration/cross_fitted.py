"""Cross-fitted predictions of "this verdict is right" for the model-assisted estimates.

:mod:`.model_assisted` corrects a prediction of each verdict's outcome with the labels; its
interval shrinks by ``sqrt(1 - R^2)`` per stratum, with ``R^2`` how much of the outcome the
prediction explains there. The fused confidence alone explains little within a stratum (the
threshold that made the strata already used most of it), so this module learns a better
prediction from every verdict's votes: each judge's probability for the fused answer, its log
odds, the share of judges agreeing and disagreeing, their entropy and the method's confidence
(:func:`vote_features`; docs/design.md, 'The review loop').

Validity needs the prediction of a labelled verdict to be fitted without its own label. Cross
fitting (cross-prediction-powered inference, Zrnic & Candes 2024): the labelled verdicts are
split into ``K`` folds inside each stratum; a regularised logistic regression fitted on ``K - 1``
folds predicts the held-out fold, and every unlabelled verdict gets the mean of the ``K``
models' predictions. The difference estimator then corrects those predictions with the labels
exactly as for the confidence (:func:`cross_fitted_strata` builds its strata). A model that
overfits costs width, never the estimate's centre: each fold's residuals come from a model that
did not see them.

Outcomes: ``accuracy`` and the auto-accept precision use the predicted probability ``q`` of
being right; the Brier score uses its prediction under ``q``, ``q (1 - c)^2 + (1 - q) c^2``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .model_assisted import AssistedStratum, brier_pseudo_values

__all__ = ["CrossFit", "cross_fit", "cross_fitted_strata", "vote_features"]

_CLIP = 1e-4


def vote_features(p_choice: np.ndarray, confidence: np.ndarray) -> np.ndarray:
    """Per verdict (rows), what the votes say about the fused answer.

    ``p_choice`` (verdicts x judges): each judge's probability for the answer the method chose
    (0.5 for an abstention or a tie); ``confidence``: the method's confidence in it. Columns:
    the confidence, each judge's probability and clipped log odds, the shares of judges above and
    below 0.5, the binary entropy of the agreeing share and the mean log odds (the margin)."""
    p = np.clip(np.asarray(p_choice, dtype=np.float64), _CLIP, 1.0 - _CLIP)
    if p.ndim != 2 or p.shape[0] != np.size(confidence):
        raise ValueError(f"p_choice must be verdicts x judges with one row per confidence, got {p.shape}")
    log_odds = np.log(p / (1.0 - p))
    agree, disagree = (p > 0.5).mean(axis=1), (p < 0.5).mean(axis=1)
    a = np.clip(agree, _CLIP, 1.0 - _CLIP)
    entropy = -(a * np.log(a) + (1.0 - a) * np.log(1.0 - a))
    columns = [np.asarray(confidence, dtype=np.float64)[:, None], p, log_odds,
               agree[:, None], disagree[:, None], entropy[:, None], log_odds.mean(axis=1)[:, None]]
    return np.hstack(columns)


@dataclass(frozen=True)
class CrossFit:
    """The cross-fitted predictions of one window.

    ``prediction``: per verdict, the held-out model's prediction for a labelled verdict and the
    mean over folds for an unlabelled one; ``per_fold``: every fold model's prediction of every
    verdict (verdicts x folds; what ``ppi_py.crossppi_mean_ci`` takes for the unlabelled ones);
    ``fold``: each labelled verdict's fold (-1 for unlabelled)."""

    prediction: np.ndarray
    per_fold: np.ndarray
    fold: np.ndarray


def _fold_ids(labelled: np.ndarray, strata: np.ndarray, folds: int, rng: np.random.Generator) -> np.ndarray:
    """Each stratum's labelled verdicts dealt round-robin to the folds in random order."""
    fold = np.full(labelled.size, -1, dtype=np.int64)
    start = 0
    for s in np.unique(strata[labelled]):
        members = np.flatnonzero(labelled & (strata == s))
        rng.shuffle(members)
        fold[members] = (np.arange(members.size) + start) % folds
        start += members.size
    return fold


def _fit_predict(x_train: np.ndarray, y_train: np.ndarray, x: np.ndarray, strength: float) -> np.ndarray:
    """P(right) from an L2 logistic regression on standardised features (intercept free), the
    training mean if one class. Newton steps on a few hundred rows: milliseconds, where a
    general solver costs ~100x under load (a window refits ``K`` times)."""
    mean = float(y_train.mean()) if y_train.size else 0.5
    if y_train.size < 4 or mean in (0.0, 1.0):
        return np.full(x.shape[0], mean)
    centre, scale = x_train.mean(axis=0), x_train.std(axis=0)
    scale[scale < 1e-12] = 1.0
    design = np.hstack([np.ones((y_train.size, 1)), (x_train - centre) / scale])
    penalty = np.full(design.shape[1], 1.0 / strength)
    penalty[0] = 0.0
    beta = np.zeros(design.shape[1])
    beta[0] = np.log(mean / (1.0 - mean))
    for _ in range(100):
        p = _sigmoid(design @ beta)
        gradient = design.T @ (p - y_train) + penalty * beta
        hessian = (design * (p * (1.0 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    full = np.hstack([np.ones((x.shape[0], 1)), (x - centre) / scale])
    if not np.isfinite(beta).all():
        return np.full(x.shape[0], mean)
    return _sigmoid(full @ beta)


def _sigmoid(eta: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(eta, -30.0, 30.0))), dtype=np.float64)


def cross_fit(features: np.ndarray, right: np.ndarray, labelled: np.ndarray, strata: np.ndarray, *,
              folds: int = 5, strength: float = 0.5, seed: int = 0) -> CrossFit:
    """Cross-fitted P(right) of every verdict (module docstring).

    ``features``: verdicts x features (e.g. :func:`vote_features`; the stratum is added as
    one-hot columns here); ``right``: 1/0, read only where ``labelled``; ``strata``: each
    verdict's stratum name. ``strength``: the inverse L2 penalty on standardised features."""
    x = np.asarray(features, dtype=np.float64)
    labelled = np.asarray(labelled, dtype=bool)
    strata = np.asarray(strata)
    if not (x.shape[0] == labelled.size == strata.size == np.size(right)):
        raise ValueError("features, right, labelled and strata need one entry per verdict")
    if folds < 2:
        raise ValueError(f"cross fitting needs at least 2 folds, got {folds}")
    names = np.unique(strata)
    if names.size > 1:
        x = np.hstack([x, (strata[:, None] == names[None, 1:]).astype(np.float64)])
    y = np.asarray(right, dtype=np.float64)
    fold = _fold_ids(labelled, strata, folds, np.random.default_rng(seed))
    per_fold = np.empty((x.shape[0], folds))
    prediction = np.empty(x.shape[0])
    for k in range(folds):
        train = labelled & (fold != k)
        per_fold[:, k] = _fit_predict(x[train], y[train], x, strength)
        held_out = fold == k
        prediction[held_out] = per_fold[held_out, k]
    unlabelled = ~labelled
    prediction[unlabelled] = per_fold[unlabelled].mean(axis=1)
    return CrossFit(prediction, per_fold, fold)


def cross_fitted_strata(fit: CrossFit, right: np.ndarray, confidence: np.ndarray, labelled: np.ndarray,
                        strata: Sequence[tuple[str, np.ndarray]]) -> dict[str, list[AssistedStratum]]:
    """The ``accuracy`` and ``brier`` strata of :func:`.model_assisted.difference_mean` with the
    cross-fitted predictions; ``strata``: (name, member mask) pairs. Pass a subset of the
    strata (the auto-accepted ones) for the auto-accept precision."""
    q, c = fit.prediction, np.asarray(confidence, dtype=np.float64)
    y = np.asarray(right, dtype=np.float64)
    brier_y, brier_f = (c - y) ** 2, q * (1.0 - c) ** 2 + (1.0 - q) * c**2
    out: dict[str, list[AssistedStratum]] = {"accuracy": [], "brier": []}
    for name, members in strata:
        lab = members & labelled
        ones = np.ones(int(lab.sum()))
        out["accuracy"].append(AssistedStratum(name, int(members.sum()), float(q[members].sum()), y[lab], q[lab], ones))
        guard = brier_pseudo_values(float(c[lab].mean()) if lab.any() else 0.5)
        out["brier"].append(AssistedStratum(name, int(members.sum()), float(brier_f[members].sum()),
                                            brier_y[lab], brier_f[lab], ones, guard))
    return out
