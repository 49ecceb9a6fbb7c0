"""Dawid-Skene's verdicts on many items as arrays (issue 46).

Why: :meth:`DawidSkeneFusion.predict` fits EM over arrays already, then scores each item with
:meth:`DawidSkeneModel.posterior_a` (a Python loop over its observations) and a validated
verdict: most of its cost on 10^5 items. Here the observations are read once (the same
:func:`~judgefuse.fusion.dawid_skene.observations`), EM is the same :func:`fit_em`, and the
posteriors of every item come from one padded items x observations table summed column by
column in each item's own order, so each log-odds is the per-item loop's sum to the bit. The
rules around it are ``__call__``'s: one valid vote keeps its confidence, no observation from a
known judge is undecided (an exact tie when tie votes exist), a posterior within 1e-12 of 0.5 is
an exact tie. Tested item by item against ``predict``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judgefuse.fusion.columnar import NONE, TIE, A, B, FusedColumns, VoteColumns, fuse_columns, single_vote_rows
from judgefuse.fusion.dawid_skene import (
    DawidSkeneFusion,
    DawidSkeneModel,
    Observation,
    fit_em,
    model_digest,
    observations,
)
from judgefuse.judges.types import JudgeVote


def dawid_skene_columns(
    method: DawidSkeneFusion,
    batches: Sequence[Sequence[JudgeVote]],
    columns: VoteColumns,
    *,
    fit_batches: Sequence[Sequence[JudgeVote]] | None = None,
) -> FusedColumns:
    """``method.predict(batches)`` as arrays (``columns``: the same batches' votes).

    An unfitted ``method`` is fitted first, as ``predict`` does: on ``fit_batches`` when given
    (eval's tie-labelled items are scored by a fit on every item, labelled ones first), else on
    ``batches``; too few items or no observation leave it unfitted (the cold-start rule,
    ``mean_probability``).
    """
    obs = [observations(votes) for votes in batches]
    if method.model is None:
        fit_on = obs if fit_batches is None else [observations(votes) for votes in fit_batches]
        if len(fit_on) >= method.min_items and any(fit_on):
            method.model = fit_em(fit_on, alpha=method.alpha, max_iter=method.max_iter)
            method.n_fit_items = len(fit_on)
            method.model_version = model_digest(method._model_params())
    if method.model is None:
        cold = fuse_columns("mean_probability", columns)
        return FusedColumns(method.name, cold.answer, cold.confidence, cold.p_a, cold.n_valid, cold.n_invalid,
                            cold.tie_broken)
    p_a, seen = posteriors(method.model, obs)
    n_valid = columns.valid.sum(axis=1).astype(np.int64)
    n_ties = columns.tie.sum(axis=1).astype(np.int64)
    n_invalid = columns.present.sum(axis=1).astype(np.int64) - n_valid - n_ties
    p_a = np.where(seen, p_a, 0.5)
    answer = np.where(p_a > 0.5, A, B).astype(np.int8)
    answer[np.isclose(p_a, 0.5, rtol=0.0, atol=1e-12)] = TIE
    answer[~seen & (n_ties == 0)] = NONE
    confidence = np.where(answer == TIE, 0.5, np.maximum(p_a, 1.0 - p_a))
    p_a = np.where(answer == TIE, 0.5, p_a)
    single, single_a, single_conf = single_vote_rows(columns, n_valid, n_ties)
    answer[single] = np.where(single_a[single], A, B)
    confidence = np.where(single, single_conf, confidence)
    p_a = np.where(single, np.where(single_a, single_conf, 1.0 - single_conf), p_a)
    undecided = answer == NONE
    confidence = np.where(undecided, 0.5, confidence)
    p_a = np.where(undecided, 0.5, p_a)
    return FusedColumns(method.name, answer, confidence, p_a, n_valid, n_invalid, np.zeros(answer.size, dtype=bool))


def posteriors(model: DawidSkeneModel, obs: Sequence[Sequence[Observation]]) -> tuple[np.ndarray, np.ndarray]:
    """``model.posterior_a`` of every item: (P(A), seen) with P(A) NaN where no observation comes
    from a judge the model knows. Each item's log-odds terms are added in its own order."""
    index = {name: j for j, name in enumerate(model.judges)}
    # the per-observation terms, each np.log of one confusion entry, as posterior_a takes them
    log_said_a = [(np.log(model.confusion[j, 1, 1]), np.log(model.confusion[j, 0, 1])) for j in range(len(model.judges))]
    log_said_b = [(np.log(model.confusion[j, 1, 0]), np.log(model.confusion[j, 0, 0])) for j in range(len(model.judges))]
    n = len(obs)
    width = max((len(item) for item in obs), default=0)
    term_a = np.zeros((n, width))
    term_b = np.zeros((n, width))
    known = np.zeros((n, width), dtype=bool)
    for i, item in enumerate(obs):
        s = 0
        for judge, letter in item:
            j = index.get(judge)
            if j is None:
                continue
            term_a[i, s], term_b[i, s] = log_said_a[j] if letter == "A" else log_said_b[j]
            known[i, s] = True
            s += 1
    log_a = np.full(n, np.log(model.prior_a))
    log_b = np.full(n, np.log1p(-model.prior_a))
    for s in range(width):  # column by column: each item's terms in its own order, as the loop adds them
        log_a = np.where(known[:, s], log_a + term_a[:, s], log_a)
        log_b = np.where(known[:, s], log_b + term_b[:, s], log_b)
    seen = np.asarray(known.any(axis=1), dtype=bool)
    with np.errstate(over="ignore"):
        p_a = 1.0 / (1.0 + np.exp(log_b - log_a))
    return np.where(seen, p_a, np.nan), seen
