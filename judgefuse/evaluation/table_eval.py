"""``evaluate`` over a :class:`~judgefuse.evaluation.vote_table.VoteTable`: every judge and every
method with a columnar form, with no object per item.

:func:`~judgefuse.evaluation.runner.evaluate` takes judged items (every loader's output) and is
the reference; :func:`evaluate_table` gives the same :class:`~judgefuse.evaluation.runner.Evaluation`
from the arrays a votes file is streamed into
(:func:`~judgefuse.evaluation.loaders.votes_columnar.load_table`), so ``judgefuse eval`` on 10^6
items never holds 10^6 pydantic objects. Every number is made by the same array code as
``evaluate``'s columnar rows (:mod:`.columnar_rows`, :mod:`.scoring`, :mod:`.ties`) or by a count of
the same integers (kappa, the confusion matrices, Krippendorff's alpha, the tie reports), so
the two agree exactly (tests/evaluation/test_table_eval.py). A method without a columnar form
(``auto``, a plugin's, the LLM fuser) needs judged items: the command line takes ``evaluate``'s
path for those (:func:`columnar_methods`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext

import numpy as np

from judgefuse.calibration.bootstrap import bootstrap_intervals_many
from judgefuse.evaluation.agreement import RowAgreement, panel_alpha_columns, row_agreement_columns
from judgefuse.evaluation.columnar_rows import columnar_ties, fuse_columnar, has_columnar_form
from judgefuse.evaluation.forked_rows import FORK_MIN_ITEMS, ForkedRows, fork_helps
from judgefuse.evaluation.runner import (
    REFERENCE_METHOD,
    Evaluation,
    EvaluationError,
    EvaluationOptions,
    RowReport,
    ci_metrics,
    default_methods,
    row_report,
)
from judgefuse.evaluation.scoring import ScoredRow, score_columns, score_judge_columns
from judgefuse.evaluation.ties import TieReport, judge_ties_columns
from judgefuse.evaluation.vote_table import LABEL_BOTH_BAD, LABEL_TIE, VoteTable
from judgefuse.fusion import NotEnoughLabels, get_method
from judgefuse.fusion.columnar import FusedColumns, VoteColumns
from judgefuse.fusion.columnar_stacking import columnar_stacking
from judgefuse.fusion.judge_outliers import warnings_from_letters

__all__ = ["columnar_methods", "evaluate_table", "first_letters", "judge_order"]


def columnar_methods(methods: Sequence[str] | None) -> bool:
    """True when every method of ``methods`` (the default rows when None) has a columnar form."""
    return all(has_columnar_form(name) for name in methods or default_methods())


def judge_order(votes: VoteColumns) -> list[str]:
    """Every judge that voted on any of the items, in order of first appearance (``judge_names``)."""
    flat = votes.judge[votes.present]  # row-major: items in order, each item's slots in order
    found, first = np.unique(flat, return_index=True)
    return [votes.judges[j] for j in found[np.argsort(first)].tolist()]


def first_letters(votes: VoteColumns) -> tuple[list[str], np.ndarray]:
    """(judges sorted by name, items x judges: +1 A, -1 B, 0 none): each judge's first vote with a
    letter on each item (``judge_outliers``'s reading of the votes)."""
    names = sorted(votes.judges[j] for j in np.unique(votes.judge[votes.present]).tolist())
    said = np.zeros((votes.n_items, len(names)), dtype=np.int8)
    rows = np.arange(votes.n_items)
    for k, name in enumerate(names):
        mine = (votes.judge == votes.judges.index(name)) & votes.valid
        slot = np.argmax(mine, axis=1)
        letter = mine.any(axis=1)
        said[:, k] = np.where(letter, np.where(votes.says_a[rows, slot], 1, -1), 0)
    return names, said


def evaluate_table(
    source: VoteTable | Callable[[], VoteTable],
    *,
    options: EvaluationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    jobs: int | None = None,
) -> Evaluation:
    """:func:`~judgefuse.evaluation.runner.evaluate` of the items of a table (module docstring).

    ``source`` is the table, or a function making it: then only its labelled and tie-labelled
    items are kept once they are taken out (at 10^6 items the whole table is 450 MB).
    ``jobs``: 1 computes every row in this process; 2 or more fits the stacking rows in a forked
    child meanwhile (:mod:`.forked_rows`: the same numbers); None decides by the machine and size.
    Raises ``ValueError`` for a method without a columnar form (:func:`columnar_methods`).
    """
    options = options or EvaluationOptions()
    methods = options.methods or default_methods()
    missing = [name for name in methods if not has_columnar_form(name)]
    if missing:
        raise ValueError(f"no columnar form for {', '.join(missing)}: evaluate judged items instead")
    table = source() if callable(source) else source
    del source
    decided = table.items.decided
    if not decided.any():
        raise EvaluationError("no labelled items: evaluation needs items with a label (A or B)")
    labelled = table.take(np.flatnonzero(decided))
    if not labelled.votes.present.any():
        raise EvaluationError("no votes on the labelled items: nothing to evaluate")
    step = progress or (lambda _name: None)
    outcome = table.items.outcome
    undecided = table.take(np.flatnonzero((outcome == LABEL_TIE) | (outcome == LABEL_BOTH_BAD)))
    n_items = table.n_items
    warnings = warnings_from_letters(*first_letters(table.votes))
    del table
    labels = labelled.items.label_a
    stacking = [k for k, name in enumerate(methods) if columnar_stacking(get_method(name))]

    def fused(name: str) -> tuple[FusedColumns, FusedColumns | None]:
        """The method's cross-fitted verdicts on the labelled items, and on the tie-labelled ones."""
        arrays = fuse_columnar(name, labels, labelled.votes, n_folds=options.n_folds, seed=options.seed)
        tail = None
        if undecided.n_items:
            tail = fuse_columnar(
                name, labels, labelled.votes, n_folds=options.n_folds, seed=options.seed, undecided=undecided.votes
            )
        return arrays, tail

    # the stacking rows (the costliest) fitted in a child from here, while this process does the rest
    forked = (
        ForkedRows([methods[k] for k in stacking], fused)
        if stacking and fork_helps(labelled.n_items >= FORK_MIN_ITEMS, jobs)
        else None
    )
    judges = judge_order(labelled.votes)
    by_method: dict[int, tuple[ScoredRow, TieReport]] = {}  # by the method's place in ``methods``
    skipped: dict[str, str] = {}
    unfitted = set(stacking)

    def method_row(k: int) -> None:
        name = methods[k]
        step(name)
        try:
            arrays, tail = forked.get(name) if forked and k in stacking else fused(name)
        except NotEnoughLabels as exc:
            skipped[name] = str(exc)
            return
        finally:
            unfitted.discard(k)
            if not unfitted:  # the stacking features (200 MB at 10^6 items) are done with
                labelled.votes.derived.pop("stacking", None)
                undecided.votes.derived.pop("stacking", None)
        by_method[k] = (
            score_columns(name, labelled.items, arrays, labelled.votes),
            columnar_ties(name, labelled.items, arrays, undecided.items, tail),
        )

    def finished(rows: Sequence[ScoredRow], places: Sequence[int]) -> list[tuple[RowReport, RowAgreement]]:
        """The rows' reports, their intervals drawn at their ``places`` in the report."""
        made = bootstrap_intervals_many(
            [(row.confidence, row.correct) for row in rows], ci_metrics(), n_resamples=options.n_bootstrap,
            seed=options.seed, n_bins=options.n_bins, eps=options.eps, positions=places,
        )  # fmt: skip
        reference = next((row for row in scored if row.name == REFERENCE_METHOD), None)
        return [
            (row_report(row, reference, options, intervals), row_agreement_columns(row, labelled.items))
            for row, intervals in zip(rows, made, strict=True)
        ]

    scored: list[ScoredRow] = []  # the judges' rows, then the methods' in order
    ties: list[TieReport] = []
    reports: dict[int, tuple[RowReport, RowAgreement]] = {}  # by place; first those made while the child fits
    with forked or nullcontext():
        for name in judges:
            step(name)
            scored.append(score_judge_columns(name, labelled.items, labelled.votes))
            ties.append(
                judge_ties_columns(name, [(labelled.items, labelled.votes), (undecided.items, undecided.votes)])
            )
        n_judges = len(scored)
        for k in range(len(methods)):
            if not (forked and k in stacking):
                method_row(k)
        if forked:
            # this process's rows' reports while the child fits, at the places they will have if no
            # stacking row is skipped (a large row's place seeds its resamples: checked below). The
            # reference row (majority) is never a stacking row, so it is here already.
            assumed = _places(n_judges, by_method.keys() | set(stacking))
            scored += [by_method[k][0] for k in sorted(by_method)]
            places = [*range(n_judges), *(assumed[k] for k in sorted(by_method))]
            reports = dict(zip(places, finished(scored, places), strict=True))
            for k in stacking:
                method_row(k)

    order = sorted(by_method)
    scored = [*scored[:n_judges], *(by_method[k][0] for k in order)]
    ties += [by_method[k][1] for k in order]
    if any(methods[k] in skipped for k in stacking):
        reports = {}  # a stacking row was skipped: the later rows' places moved, so all are drawn anew
    todo = [at for at in range(len(scored)) if at not in reports]
    reports.update(zip(todo, finished([scored[at] for at in todo], todo), strict=True))
    return Evaluation(
        n_items=n_items,
        n_labelled=labelled.n_items,
        rows=[reports[at][0] for at in range(len(scored))],
        skipped_methods=skipped,
        options=options,
        agreement=[reports[at][1] for at in range(len(scored))],
        judges_alpha=panel_alpha_columns(labelled.votes, judges),
        ties=ties,
        judge_warnings=warnings,
    )


def _places(n_judges: int, present: Collection[int]) -> dict[int, int]:
    """Each present method's place among a report's rows: the judges' rows first, then the present
    methods in order (a skipped method has no row)."""
    return {k: n_judges + i for i, k in enumerate(sorted(present))}
