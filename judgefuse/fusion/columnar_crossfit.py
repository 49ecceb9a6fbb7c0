"""Cross-fitting on index arrays for methods whose learned part sees only a label-free base's
verdicts: ``<voting rule>+<recalibrator>``.

Why: :func:`~judgefuse.fusion.crossfit.cross_fit_predict` refits
:class:`~judgefuse.fusion.recalibrated.Recalibrated` per fold, and each fit and each prediction
re-fuses its items one by one with the base rule (``majority``): 5 folds x (4/5 + 1/5) of the
items fused again, plus a validated verdict each. A voting rule's verdict on an item does not
depend on any other item or label, so the base is fused once for every item
(:func:`~judgefuse.fusion.columnar.fuse_columns`) and each fold only indexes it: the recalibrator
is fitted on the training rows' decided (confidence, correct) pairs and maps the held-out rows'
confidences, exactly what ``Recalibrated.fit`` and ``predict`` do on those rows (same folds, same
order of training pairs, same checks and ``NotEnoughLabels`` messages). Tested against
``cross_fit_predict`` item by item.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judgefuse.fusion.columnar import COLUMNAR_METHODS, A, B, Bools, FusedColumns, VoteColumns, fuse_columns
from judgefuse.fusion.columnar_stacking import columnar_stacking, cross_fit_stacking, fit_and_apply_stacking
from judgefuse.fusion.crossfit import folds_of, label_array
from judgefuse.fusion.recalibrated import Recalibrated
from judgefuse.fusion.registry import FusionMethod, NotEnoughLabels, get_method
from judgefuse.fusion.stacking import check_label_counts
from judgefuse.judges.types import Letter


def columnar_recalibrated(method: FusionMethod) -> bool:
    """True when ``method`` is a recalibrated voting rule (its base has a columnar form)."""
    return (
        isinstance(method, Recalibrated)
        and method.base.name in COLUMNAR_METHODS
        and not getattr(method.base, "requires_fit", False)
    )


def columnar_learned(method: FusionMethod) -> bool:
    """True for a learned method :func:`cross_fit_columns` fits over arrays: a recalibrated
    voting rule, ``stacked`` or ``offset_stacked`` (:mod:`.columnar_stacking`)."""
    return columnar_recalibrated(method) or columnar_stacking(method)


def fit_recalibrator(method: Recalibrated, base: FusedColumns, label_a: Bools) -> None:
    """``method.fit`` on the items of ``base`` (its base rule's verdicts) with labels ``label_a``."""
    n_a = int(label_a.sum())
    check_label_counts(n_a, int(label_a.size) - n_a, min_labels=method.min_labels)
    decided = base.decided
    if int(decided.sum()) < method.min_labels:
        raise NotEnoughLabels(
            f"only {int(decided.sum())} decided verdicts to recalibrate on; at least {method.min_labels} are needed"
        )
    correct = ((base.answer == A) == label_a)[decided].astype(float)
    method.recalibrator.fit(base.confidence[decided].astype(float), correct)
    method.fitted = True
    method.model_version = method._version()


def recalibrate(method: Recalibrated, base: FusedColumns) -> FusedColumns:
    """``method.predict`` on the items of ``base``: decided items' confidences mapped, the
    others (exact ties, undecided) passed through."""
    decided = base.decided
    confidence = base.confidence.copy()
    if decided.any():
        confidence[decided] = np.clip(method.recalibrator.transform(base.confidence[decided].astype(float)), 0.0, 1.0)
    p_a = np.where(base.answer == A, confidence, np.where(base.answer == B, 1.0 - confidence, base.p_a))
    return FusedColumns(method.name, base.answer, confidence, p_a, base.n_valid, base.n_invalid, base.tie_broken)


def cross_fit_columns(
    name: str, columns: VoteColumns, labels: Sequence[Letter] | Bools, *, n_folds: int = 5, seed: int = 0
) -> FusedColumns:
    """Out-of-fold verdicts of the recalibrated voting rule ``name`` for every item, as
    :func:`~judgefuse.fusion.crossfit.cross_fit_predict` gives them (see the module docstring);
    ``stacked`` and ``offset_stacked`` by :func:`~.columnar_stacking.cross_fit_stacking`."""
    probe = get_method(name)
    if columnar_stacking(probe):
        return cross_fit_stacking(name, columns, labels, n_folds=n_folds, seed=seed)
    if not isinstance(probe, Recalibrated) or not columnar_recalibrated(probe):
        raise ValueError(f"{name!r} is not a recalibrated voting rule")
    if len(labels) != columns.n_items:
        raise ValueError(f"length mismatch: {columns.n_items} batches, {len(labels)} labels")
    base = fuse_columns(probe.base.name, columns)
    label_a = label_array(labels)
    answer = base.answer.copy()
    confidence = base.confidence.copy()
    p_a = base.p_a.copy()
    for k, test in enumerate(folds_of(label_a, n_folds=n_folds, seed=seed)):
        method = probe if k == 0 else get_method(name)
        assert isinstance(method, Recalibrated)
        in_test = np.zeros(columns.n_items, dtype=bool)
        in_test[test] = True
        train = np.flatnonzero(~in_test)  # ascending, as cross_fit_predict's list
        fit_recalibrator(method, base.take(train), label_a[train])
        held = recalibrate(method, base.take(test))
        answer[test], confidence[test], p_a[test] = held.answer, held.confidence, held.p_a
    return FusedColumns(name, answer, confidence, p_a, base.n_valid, base.n_invalid, base.tie_broken)


def fit_and_apply(name: str, train: VoteColumns, labels: Sequence[Letter] | Bools, target: VoteColumns) -> FusedColumns:
    """The recalibrated voting rule ``name`` (or ``stacked``, ``offset_stacked``) fitted on every
    item of ``train`` and applied to ``target`` (eval's tie-labelled items: no tie label is a
    training label)."""
    method = get_method(name)
    if columnar_stacking(method):
        return fit_and_apply_stacking(name, train, labels, target)
    if not isinstance(method, Recalibrated) or not columnar_recalibrated(method):
        raise ValueError(f"{name!r} is not a recalibrated voting rule")
    fit_recalibrator(method, fuse_columns(method.base.name, train), label_array(labels))
    return recalibrate(method, fuse_columns(method.base.name, target))
