"""A fusion method's row over vote arrays, shared by ``evaluate`` (judged items) and
``evaluate_table`` (:mod:`.table_eval`, a votes file read into arrays).

:func:`fuse_columnar` gives, as arrays, what the per-item path gives for a method with a columnar
form (every voting rule, their recalibrated variants, ``dawid_skene``, ``stacked`` and
``offset_stacked``): cross-fitted verdicts on the labelled items (the same folds), and on the
tie-labelled items a learned method's fit on every A/B label (``dawid_skene`` fitted on every
item). :func:`columnar_ties` is the row's tie report from those arrays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from judgefuse.evaluation.ties import TieReport, tie_report_codes
from judgefuse.evaluation.vote_table import ItemColumns
from judgefuse.fusion import get_method
from judgefuse.fusion.columnar import COLUMNAR_METHODS, FusedColumns, VoteColumns, fuse_columns
from judgefuse.fusion.columnar_crossfit import columnar_learned, cross_fit_columns, fit_and_apply
from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
from judgefuse.fusion.dawid_skene import NAME as DAWID_SKENE
from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.fusion.registry import FusionMethod
from judgefuse.judges.types import Letter

__all__ = ["columnar_ties", "fuse_columnar", "has_columnar_form"]


def has_columnar_form(name: str, get: Callable[[str], FusionMethod] = get_method) -> bool:
    """True for a voting rule, a recalibrated voting rule, dawid_skene, stacked and offset_stacked
    (fused over arrays, not item by item); ``get`` makes the method from its name."""
    return name in COLUMNAR_METHODS or name == DAWID_SKENE or columnar_learned(get(name))


def fuse_columnar(
    name: str,
    labels: Sequence[Letter] | NDArray[np.bool_],
    columns: VoteColumns,
    *,
    n_folds: int,
    seed: int,
    undecided: VoteColumns | None = None,
) -> FusedColumns:
    """As arrays, for a method with a columnar form: without ``undecided``, its cross-fitted
    verdicts on the labelled items of ``columns`` (``labels`` theirs); with it, its verdicts on
    the tie-labelled items ``undecided`` (a learned method fitted on every labelled item,
    dawid_skene on every item, labelled first). ``labels``: letters, or True for A."""
    target = columns if undecided is None else undecided
    if name in COLUMNAR_METHODS:
        return fuse_columns(name, target)
    if name == DAWID_SKENE:
        method = get_method(name)
        assert isinstance(method, DawidSkeneFusion)
        if undecided is None:
            return dawid_skene_columns(method, columns)
        return dawid_skene_columns(method, target, fit_parts=[columns, target])
    if undecided is not None:
        return fit_and_apply(name, columns, labels, target)
    return cross_fit_columns(name, columns, labels, n_folds=n_folds, seed=seed)


def columnar_ties(
    name: str,
    labelled: ItemColumns,
    fused: FusedColumns,
    undecided: ItemColumns,
    undecided_fused: FusedColumns | None,
) -> TieReport:
    """The tie report of a method's verdicts given as arrays: on the labelled items, and on the
    tie-labelled ones when it has verdicts there."""
    answers = fused.answer if undecided_fused is None else np.concatenate([fused.answer, undecided_fused.answer])
    labels = labelled.outcome if undecided_fused is None else np.concatenate([labelled.outcome, undecided.outcome])
    return tie_report_codes(name, answers, labels)
