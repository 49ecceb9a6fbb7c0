"""``compare`` over a :class:`~judgefuse.evaluation.vote_table.VoteTable`: the same
:class:`~judgefuse.evaluation.comparison.CompareReport` as
:func:`~judgefuse.evaluation.comparison.compare_report`, with no object per item.

:func:`~judgefuse.evaluation.comparison.compare_report` takes judged items (every loader's output)
and is the reference; :func:`compare_table` reads each judge's first vote on every item from the
arrays a votes file is streamed into (:func:`~judgefuse.evaluation.loaders.votes_columnar.load_table`),
so ``judgefuse compare`` on 10^6 items never holds 10^6 pydantic objects. Every number comes from
the same array code (the two judges' rows from
:func:`~judgefuse.evaluation.scoring.score_judge_columns`, the views and intervals from
:func:`~judgefuse.evaluation.comparison.compare_scored`, the ties from
:func:`~judgefuse.evaluation.ties.judge_ties_columns`) or from the same arrays the per-item code
builds (candidate scores, the common pool, self-preference), so the reports are equal to the bit
(tests/evaluation/test_table_compare.py). Bootstrap intervals of large comparisons are drawn over
cells on both paths alike (:mod:`judgefuse.calibration.paired_cells`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from judgefuse.evaluation.candidate_aligned import (
    ANSWER_MODEL_KEYS,
    CandidateScores,
    PoolRow,
    SelfPreference,
    model_family,
    preference_row,
)
from judgefuse.evaluation.comparison import CompareReport, check_judges, compare_scored
from judgefuse.evaluation.scoring import NO_ANSWER_CONFIDENCE, score_judge_columns
from judgefuse.evaluation.table_eval import judge_order
from judgefuse.evaluation.ties import judge_ties_columns
from judgefuse.evaluation.vote_table import ItemColumns, VoteTable
from judgefuse.fusion.columnar import Ints, VoteColumns

__all__ = ["ANSWER_MODEL_FIELDS", "compare_table"]

ANSWER_MODEL_FIELDS = tuple(key for pair in ANSWER_MODEL_KEYS for key in pair)
"""The item metadata fields self-preference reads: the table must be read with them."""

NO_ANSWER, ANSWER_A, ANSWER_B = 0, 1, 2


def compare_table(
    table: VoteTable,
    judge_1: str,
    judge_2: str,
    *,
    n_bins: int = 10,
    n_resamples: int = 1000,
    seed: int = 0,
) -> CompareReport:
    """:func:`~judgefuse.evaluation.comparison.compare_report` of the items of ``table`` (read with
    :data:`ANSWER_MODEL_FIELDS` for self-preference)."""
    items, votes = table.items, table.votes
    names = judge_order(votes)
    check_judges(names, judge_1, judge_2)
    evidence = compare_scored(
        score_judge_columns(judge_1, items, votes),
        score_judge_columns(judge_2, items, votes),
        lambda name, common: _candidates(name, items, votes, common),
        n_bins=n_bins,
        n_resamples=n_resamples,
        seed=seed,
    )
    pool, pool_size = _common_pool(names, items, votes, n_bins=n_bins)
    preference = _self_preference(names, items, votes, n_resamples=n_resamples, seed=seed)
    ties = [judge_ties_columns(name, [(items, votes)]) for name in names]
    return CompareReport(judge_1, judge_2, evidence, pool, pool_size, preference, ties)


def _answers(name: str, votes: VoteColumns, rows: Ints) -> tuple[np.ndarray, np.ndarray]:
    """The judge's first vote on each item at ``rows``: its answer code (:data:`NO_ANSWER`,
    :data:`ANSWER_A`, :data:`ANSWER_B`; a tie is no letter) and its ``p_a`` (0.5 with no letter)."""
    _, slot = votes.first_vote(name)
    at = slot[rows]
    valid = votes.valid[rows, at]
    p_a = votes.p_a[rows, at]
    code = np.where(valid, np.where(votes.says_a[rows, at], ANSWER_A, ANSWER_B), NO_ANSWER).astype(np.int8)
    return code, np.where(valid & np.isfinite(p_a), p_a, NO_ANSWER_CONFIDENCE).astype(float)


def _candidates(name: str, items: ItemColumns, votes: VoteColumns, only: Ints) -> CandidateScores:
    """:func:`~judgefuse.evaluation.candidate_aligned.candidate_scores` on the positions ``only``."""
    voted, _ = votes.first_vote(name)
    keep = np.zeros(items.n_items, dtype=bool)
    keep[only] = True
    rows = np.flatnonzero(keep & voted & items.decided)
    _, p_a = _answers(name, votes, rows)
    return CandidateScores(p_a, items.label_a[rows], rows)


def _common_pool(
    names: Sequence[str], items: ItemColumns, votes: VoteColumns, *, n_bins: int
) -> tuple[list[PoolRow], int]:
    """:func:`~judgefuse.evaluation.candidate_aligned.common_pool` from the arrays."""
    in_pool = items.decided.copy()
    for name in names:
        in_pool &= votes.first_vote(name)[0]
    rows = np.flatnonzero(in_pool)
    label_a = items.label_a[rows]
    answers = {name: _answers(name, votes, rows) for name in names}
    out = []
    for name in names:
        mine, p_a = answers[name]
        scores = CandidateScores(p_a, label_a, rows)
        right = (mine != NO_ANSWER) & ((mine == ANSWER_A) == label_a)
        others = [
            float(np.mean((mine != NO_ANSWER) & (mine == answers[other][0]))) for other in names if other != name
        ]  # fmt: skip
        out.append(
            PoolRow(
                judge=name,
                n=rows.size,
                accuracy=float(np.mean(right)) if rows.size else math.nan,
                agreement=float(np.mean(others)) if others and rows.size else math.nan,
                ca_ece=scores.ece(n_bins) if rows.size else math.nan,
                ca_brier=scores.brier() if rows.size else math.nan,
            )
        )
    return out, int(rows.size)


def _families(metadata: Mapping[str, Sequence[Any]], n: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per item, the codes of the model families of answer A and answer B (-1: not named), and the
    families the codes index (:func:`~judgefuse.evaluation.candidate_aligned.answer_families`)."""
    codes: dict[str | None, int] = {None: -1}
    by_model: dict[str, int] = {}

    def code(model: str) -> int:
        if model not in by_model:
            by_model[model] = codes.setdefault(model_family(model), len(codes) - 1)
        return by_model[model]

    fam_a = np.full(n, -1, dtype=np.int64)
    fam_b = np.full(n, -1, dtype=np.int64)
    undone = np.ones(n, dtype=bool)
    for key_a, key_b in ANSWER_MODEL_KEYS:
        models_a, models_b = metadata.get(key_a), metadata.get(key_b)
        if models_a is None or models_b is None or all(model is None for model in models_a):
            continue
        for i in np.flatnonzero(undone).tolist():
            model_a, model_b = models_a[i], models_b[i]
            if isinstance(model_a, str) and isinstance(model_b, str):
                fam_a[i], fam_b[i] = code(model_a), code(model_b)
                undone[i] = False
    return fam_a, fam_b, [family for family in codes if family is not None]


def _self_preference(
    names: Sequence[str], items: ItemColumns, votes: VoteColumns, *, n_resamples: int, seed: int
) -> list[SelfPreference]:
    """:func:`~judgefuse.evaluation.candidate_aligned.self_preference` from the arrays."""
    fam_a, fam_b, families = _families(items.metadata, items.n_items)
    named = items.decided & (fam_a >= 0) & (fam_b >= 0)
    found = []
    for name in names:
        family = model_family(name)
        if family is None or family not in families:
            continue
        own = families.index(family)
        rows = np.flatnonzero(named & ((fam_a == own) != (fam_b == own)) & votes.first_vote(name)[0])
        if rows.size:
            answer, _ = _answers(name, votes, rows)
            found.append(
                preference_row(
                    name,
                    family,
                    fam_a[rows] == own,
                    answer != NO_ANSWER,
                    answer == ANSWER_A,
                    items.label_a[rows],
                    n_resamples=n_resamples,
                    level=0.95,
                    seed=seed,
                )
            )
    return found
