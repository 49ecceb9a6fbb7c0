"""Dawid-Skene's verdicts on many items as arrays.

Why: :meth:`DawidSkeneFusion.predict` fits EM over arrays already, then scores each item with
:meth:`DawidSkeneModel.posterior_a` (a Python loop over its observations) and a validated
verdict: most of its cost on 10^5 items. Here the observations are the vote arrays' ``games``
(what :func:`~judgefuse.fusion.dawid_skene.vote_games` says each vote is observed saying, read
with the votes), EM is the same :func:`~judgefuse.fusion.dawid_skene.fit_em_rows` on the same
rows in the same order, and the posteriors of every item come from its items x (slots x 2)
table summed column by column in each item's own order, so each log-odds is the per-item loop's
sum to the bit. The rules around it are ``__call__``'s: one valid vote keeps its confidence, no
observation from a known judge is undecided (an exact tie when tie votes exist), a posterior
within 1e-12 of 0.5 is an exact tie. Tested item by item against ``predict``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judgefuse.fusion.columnar import (
    NONE,
    TIE,
    A,
    B,
    FusedColumns,
    VoteColumns,
    fuse_columns,
    row_count,
    single_vote_rows,
)
from judgefuse.fusion.dawid_skene import DawidSkeneFusion, DawidSkeneModel, fit_em_rows, model_digest

EXACT_EM_ROWS = 200_000
"""Up to this many observations EM runs on them one by one (``fit_em_rows``: the per-item fit to
the bit) and each item's posterior adds its terms in its own order; above, both go by count
patterns (:func:`fit_em_counts`, :func:`pattern_posteriors`: the same values to about 1e-15; two
items' posteriors that tie to the last bit in one may not in the other, which moves a rank metric
such as AUROC by one pair, 1 / (n_A n_B): below 1e-9 from about 10^5 items)."""


def dawid_skene_columns(
    method: DawidSkeneFusion, columns: VoteColumns, *, fit_parts: Sequence[VoteColumns] | None = None
) -> FusedColumns:
    """``method.predict`` of the items of ``columns`` as arrays.

    An unfitted ``method`` is fitted first, as ``predict`` does: on the items of ``fit_parts`` in
    order when given (eval's tie-labelled items are scored by a fit on every item, labelled ones
    first), else on ``columns``' items; too few items or no observation leave it unfitted (the
    cold-start rule, ``mean_probability``).
    """
    if method.model is None:
        parts = [columns] if fit_parts is None else list(fit_parts)
        n_fit = sum(part.n_items for part in parts)
        if n_fit >= method.min_items and any(part.games.any() for part in parts):
            method.model = fit_parts_em(parts, alpha=method.alpha, max_iter=method.max_iter)
            method.n_fit_items = n_fit
            method.model_version = model_digest(method._model_params())
    if method.model is None:
        cold = fuse_columns("mean_probability", columns)
        return FusedColumns(
            method.name, cold.answer, cold.confidence, cold.p_a, cold.n_valid, cold.n_invalid, cold.tie_broken
        )
    large = int(np.count_nonzero(columns.games)) > EXACT_EM_ROWS
    p_a, seen = pattern_posteriors(method.model, columns) if large else posteriors(method.model, columns)
    n_valid = row_count(columns.valid)
    n_ties = row_count(columns.tie)
    n_invalid = row_count(columns.present) - n_valid - n_ties
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


def observation_rows(
    parts: Sequence[VoteColumns],
) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """``fit_em``'s rows of the items of ``parts`` in order: (judges with an observation, sorted;
    item, judge index into them, 1 if the letter said is A), each item's observations in the
    order ``observations`` lists them (slot by slot, a vote's games in order)."""
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]] = []
    offset = 0
    names: set[str] = set()
    for part in parts:
        item, slot, game = np.nonzero(part.games)  # C order: item, then slot, then game
        judge = part.judge[item, slot]
        said = part.games[item, slot, game]
        found.append((item + offset, judge, said, part.judges))
        names.update(part.judges[j] for j in np.unique(judge).tolist())
        offset += part.n_items
    judges = sorted(names)
    at = {name: j for j, name in enumerate(judges)}
    items, indexes, letters = [], [], []
    for item, judge, said, part_judges in found:
        remap = np.asarray([at.get(name, -1) for name in part_judges], dtype=np.int64)
        items.append(item.astype(np.int64))
        indexes.append(remap[judge] if remap.size else judge.astype(np.int64))
        letters.append((said == A).astype(np.int64))
    if not items:
        return judges, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return judges, np.concatenate(items), np.concatenate(indexes), np.concatenate(letters)


def fit_parts_em(parts: Sequence[VoteColumns], *, alpha: float, max_iter: int) -> DawidSkeneModel:
    """EM on the observations of the items of ``parts``: one by one (``fit_em_rows``, the
    per-item fit to the bit) up to :data:`EXACT_EM_ROWS` of them, else on their count patterns
    (:func:`fit_em_counts`)."""
    if sum(int(np.count_nonzero(part.games)) for part in parts) <= EXACT_EM_ROWS:
        judges, item, judge, said = observation_rows(parts)
        return fit_em_rows(
            judges, item, judge, said, sum(part.n_items for part in parts), alpha=alpha, max_iter=max_iter
        )
    names: set[str] = set()
    for part in parts:
        names.update(part.judges[j] for j in np.unique(part.judge[part.games.any(axis=2)]).tolist())
    judges = sorted(names)
    return fit_em_counts(
        judges, np.concatenate([game_counts(part, judges) for part in parts]), alpha=alpha, max_iter=max_iter
    )


def game_counts(columns: VoteColumns, judges: Sequence[str]) -> np.ndarray:
    """Items x (judges x 2): how often each of ``judges`` was observed saying B (column 2j) and A
    (2j + 1) on each item (``fit_em_rows``' cells; judges not named are left out)."""
    at = {name: j for j, name in enumerate(judges)}
    remap = np.asarray([at.get(name, -1) for name in columns.judges], dtype=np.int64)
    judge = remap[columns.judge] if remap.size else np.full(columns.judge.shape, -1, dtype=np.int64)
    judge = np.where(columns.present, judge, -1)
    out = np.zeros((columns.n_items, 2 * len(judges)), dtype=np.int32)
    for j in np.unique(judge[judge >= 0]).tolist():
        mine = judge == j
        for column, letter in ((2 * j, B), (2 * j + 1, A)):
            out[:, column] = row_count(mine & (columns.games[:, :, 0] == letter))
            out[:, column] += row_count(mine & (columns.games[:, :, 1] == letter))
    return out


def fit_em_counts(
    judges: list[str], counts: np.ndarray, *, alpha: float = 1.0, max_iter: int = 500, tol: float = 1e-7
) -> DawidSkeneModel:
    """:func:`~judgefuse.fusion.dawid_skene.fit_em_rows` with the items grouped by what they were
    observed to say (``counts``: :func:`game_counts`): an item's posterior at every EM step depends
    only on how many times each judge said each letter on it, so items with the same counts share
    one posterior and each step costs the number of distinct count patterns (at most a few
    hundred for a five-judge panel) instead of the number of observations (5 x 10^6 at 10^6
    items). The sums are the same sums grouped, so the fit equals the per-observation one to
    rounding (about 1e-15; tested)."""
    n_judges = len(judges)
    patterns, weight = _patterns(counts)
    n_all = patterns.sum(axis=1)
    has_obs = n_all > 0
    post = (patterns[:, 1::2].sum(axis=1) + 0.5) / (n_all + 1.0)
    confusion = np.full((n_judges, 2, 2), 0.5)
    prior_a = 0.5
    n_iter = 0
    observed = has_obs * weight
    while n_iter < max_iter:
        n_iter += 1
        prior_a = float(np.clip(((observed * post).sum() + 1.0) / (observed.sum() + 2.0), 1e-3, 1 - 1e-3))
        counts_said = np.empty((n_judges, 2, 2))
        counts_said[:, 1, :] = ((weight * post) @ patterns).reshape(n_judges, 2)
        counts_said[:, 0, :] = ((weight * (1.0 - post)) @ patterns).reshape(n_judges, 2)
        confusion = (counts_said + alpha) / (counts_said.sum(axis=2, keepdims=True) + 2.0 * alpha)
        step = (np.log(confusion[:, 1, :]) - np.log(confusion[:, 0, :])).ravel()
        log_ratio = np.log(prior_a) - np.log1p(-prior_a) + patterns @ step
        new_post = np.where(has_obs, 1.0 / (1.0 + np.exp(-log_ratio)), 0.5)
        change = float(np.max(np.abs(new_post - post)))
        post = new_post
        if change < tol:
            break
    return DawidSkeneModel(judges, prior_a, confusion, n_iter)


def _patterns(counts: np.ndarray, inverse: bool = False) -> tuple[np.ndarray, ...]:
    """The distinct rows of ``counts`` (as floats) and how many items have each (with
    ``inverse``, also each item's pattern): rows packed into one integer key when they fit."""
    base = int(counts.max(initial=0)) + 1
    if counts.shape[1] and base ** counts.shape[1] < 2**62:
        key = counts.astype(np.int64) @ (base ** np.arange(counts.shape[1], dtype=np.int64))
        _, first, where, weight = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
        patterns = counts[first]
    else:
        patterns, where, weight = np.unique(counts, axis=0, return_inverse=True, return_counts=True)
    out = (patterns.astype(float), weight.astype(float))
    return (*out, where.ravel()) if inverse else out


def pattern_posteriors(model: DawidSkeneModel, columns: VoteColumns) -> tuple[np.ndarray, np.ndarray]:
    """:func:`posteriors` computed once per count pattern (large data: the same values to about
    1e-15, each term added once per count rather than once per observation)."""
    counts = game_counts(columns, model.judges)
    patterns, _, where = _patterns(counts, inverse=True)
    logs = np.log(model.confusion)  # (judges, truth, said)
    log_a = np.log(model.prior_a) + patterns @ logs[:, 1, :].ravel()
    log_b = np.log1p(-model.prior_a) + patterns @ logs[:, 0, :].ravel()
    seen = patterns.sum(axis=1) > 0
    with np.errstate(over="ignore"):
        p_a = 1.0 / (1.0 + np.exp(log_b - log_a))
    p_a = np.where(seen, p_a, np.nan)
    return p_a[where], seen[where]


def posteriors(model: DawidSkeneModel, columns: VoteColumns) -> tuple[np.ndarray, np.ndarray]:
    """``model.posterior_a`` of every item: (P(A), seen) with P(A) NaN where no observation comes
    from a judge the model knows. Each item's log-odds terms are added in its own order."""
    index = {name: j for j, name in enumerate(model.judges)}
    remap = np.asarray([index.get(name, -1) for name in columns.judges], dtype=np.int64)
    n = columns.n_items
    width = columns.games.shape[1] * 2
    games = columns.games.reshape(n, width)  # slot by slot, a vote's games in order
    known_judge = remap[columns.judge] if remap.size else np.full(columns.judge.shape, -1, dtype=np.int64)
    judge = np.repeat(np.where(columns.present, known_judge, -1), 2, axis=1)
    known = (games != 0) & (judge >= 0)
    # the per-observation terms, each np.log of one confusion entry (a scalar call, as
    # posterior_a takes them)
    logs = np.asarray(
        [
            [[float(np.log(model.confusion[j, truth, said])) for said in (0, 1)] for truth in (0, 1)]
            for j in range(len(model.judges))
        ]
    ).reshape(-1, 2, 2)
    safe = np.maximum(judge, 0)
    column = np.where(games == A, 1, 0)
    term_a = logs[safe, 1, column] if logs.size else np.zeros((n, width))
    term_b = logs[safe, 0, column] if logs.size else np.zeros((n, width))
    log_a = np.full(n, np.log(model.prior_a))
    log_b = np.full(n, np.log1p(-model.prior_a))
    for s in range(width):  # column by column: each item's terms in its own order, as the loop adds them
        log_a = np.where(known[:, s], log_a + term_a[:, s], log_a)
        log_b = np.where(known[:, s], log_b + term_b[:, s], log_b)
    seen = np.asarray(known.any(axis=1), dtype=bool)
    with np.errstate(over="ignore"):
        p_a = 1.0 / (1.0 + np.exp(log_b - log_a))
    return np.where(seen, p_a, np.nan), seen
