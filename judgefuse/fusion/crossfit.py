"""Cross-fitting: score every labelled item with a model that never saw its label.

``cross_fit_predict`` splits the items into ``n_folds`` stratified folds (by label, shuffled
with ``seed``), fits a fresh method from ``method_factory`` on the other folds and scores the
held-out fold. The verdicts come back in the input order, each with a note naming its fold.
Use it for every offline evaluation of a learned method (stacked fusion, recalibration).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from judgefuse.fusion.registry import FusionMethod, NotEnoughLabels, get_method, requires_fit
from judgefuse.fusion.stacking import check_labels
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote


def _fresh(method_factory: Callable[[], FusionMethod] | str) -> FusionMethod:
    if isinstance(method_factory, str):
        return get_method(method_factory)
    return method_factory()


def predict_many(method: FusionMethod, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
    """``method`` applied to every batch, through its vectorised ``predict`` when it has one."""
    predict = getattr(method, "predict", None)
    if callable(predict):
        return list(predict(batches))
    return [method(batch) for batch in batches]


def fold_indices(
    labels: Sequence[Literal["A", "B"]], *, n_folds: int = 5, seed: int = 0
) -> list[np.ndarray]:
    """The held-out indices of each stratified fold (disjoint, covering every item)."""
    if n_folds < 2:
        raise ValueError("n_folds must be >= 2")
    return stratified_folds(check_labels([()] * len(labels), labels), n_folds=n_folds, seed=seed)


def stratified_folds(y: np.ndarray, *, n_folds: int = 5, seed: int = 0) -> list[np.ndarray]:
    """:func:`fold_indices` of labels given as an array ``y`` (1 for A, 0 for B)."""
    if n_folds < 2:
        raise ValueError("n_folds must be >= 2")
    y = np.asarray(y, dtype=np.int64)
    n_a, n_b = int(y.sum()), int(y.size - y.sum())
    if min(n_a, n_b) < n_folds:
        raise NotEnoughLabels(
            f"labels have {n_a} A and {n_b} B; stratified {n_folds}-fold cross-fitting needs "
            f"at least {n_folds} of each"
        )
    from sklearn.model_selection import StratifiedKFold  # lazy: sklearn costs ~1 s to import

    splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [test for _, test in splitter.split(np.zeros((y.size, 1)), y)]


def label_array(labels: Sequence[Literal["A", "B"]] | NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Labels as a boolean array (True for A): given so, or as letters ("A" or "B")."""
    if isinstance(labels, np.ndarray):
        return np.asarray(labels, dtype=bool)
    check_labels([()] * len(labels), labels)  # only A or B
    return np.asarray([label == "A" for label in labels], dtype=bool)


_FOLDS: dict[tuple[bytes, int, int], list[np.ndarray]] = {}


def folds_of(label_a: NDArray[np.bool_], *, n_folds: int, seed: int) -> list[np.ndarray]:
    """:func:`fold_indices` of labels given as an array, kept for the next method cross-fitted on
    the same labels (eval cross-fits four on one set: 1 s each at 10^6 items)."""
    key = (hashlib.sha256(np.packbits(label_a).tobytes() + label_a.size.to_bytes(8, "little")).digest(), n_folds, seed)
    if key not in _FOLDS:
        if len(_FOLDS) >= 4:
            _FOLDS.pop(next(iter(_FOLDS)))
        _FOLDS[key] = stratified_folds(label_a, n_folds=n_folds, seed=seed)
    return _FOLDS[key]


def cross_fit_predict(
    method_factory: Callable[[], FusionMethod] | str,
    batches: Sequence[Sequence[JudgeVote]],
    labels: Sequence[Literal["A", "B"]],
    *,
    n_folds: int = 5,
    seed: int = 0,
) -> list[Verdict]:
    """Out-of-fold verdicts for every item (input order).

    ``method_factory`` returns a fresh, unfitted method (or is a registered name, e.g.
    ``"stacked"`` or ``"majority+isotonic"``). A method that needs no fit is simply applied.
    Raises ``NotEnoughLabels`` when a class has fewer than ``n_folds`` items, and whatever the
    method's ``fit`` raises for a fold (``NotEnoughLabels`` for a degenerate fold).
    """
    if len(batches) != len(labels):
        raise ValueError(f"length mismatch: {len(batches)} batches, {len(labels)} labels")
    probe = _fresh(method_factory)
    if not requires_fit(probe):
        return predict_many(probe, batches)
    out: list[Verdict | None] = [None] * len(batches)
    for k, test in enumerate(fold_indices(labels, n_folds=n_folds, seed=seed)):
        held_out = set(test.tolist())
        train = [i for i in range(len(batches)) if i not in held_out]
        method = probe if k == 0 else _fresh(method_factory)
        fit = method.fit  # type: ignore[attr-defined]
        fit([batches[i] for i in train], [labels[i] for i in train])
        held = test.tolist()
        note = f"cross-fitted: fold {k + 1}/{n_folds}, fitted on {len(train)} items"
        for i, verdict in zip(held, predict_many(method, [batches[i] for i in held]), strict=True):
            verdict.notes.append(note)
            out[i] = verdict
    assert all(v is not None for v in out)
    return [v for v in out if v is not None]


def outcome_folds(outcomes: Sequence[str], *, n_folds: int = 5, seed: int = 0) -> list[np.ndarray]:
    """The held-out indices of each fold over labels that may be ``tie`` or ``both_bad`` too:
    A, B and the rest (tie, both_bad) are each shuffled with ``seed`` and dealt round-robin, so
    every fold gets its share of each. ``NotEnoughLabels`` when A or B has fewer than ``n_folds``
    items (the rest may have fewer: some folds then hold none)."""
    if n_folds < 2:
        raise ValueError("n_folds must be >= 2")
    rng = np.random.default_rng(seed)
    fold = np.empty(len(outcomes), dtype=np.int64)
    for group in (("A",), ("B",), ("tie", "both_bad")):
        members = np.asarray([i for i, outcome in enumerate(outcomes) if outcome in group], dtype=np.int64)
        if group != ("tie", "both_bad") and members.size < n_folds:
            raise NotEnoughLabels(
                f"{members.size} {group[0]} labels; cross-fitting over {n_folds} folds needs at least {n_folds}"
            )
        fold[rng.permutation(members)] = np.arange(members.size) % n_folds
    return [np.flatnonzero(fold == k) for k in range(n_folds)]


def cross_fit_outcomes(
    method_factory: Callable[[], FusionMethod],
    batches: Sequence[Sequence[JudgeVote]],
    outcomes: Sequence[str],
    *,
    n_folds: int = 5,
    seed: int = 0,
) -> list[Verdict]:
    """:func:`cross_fit_predict` for a method whose ``fit`` takes tie labels
    (``fits_tie_labels``, e.g. ``auto``): ``outcomes`` are ``A``, ``B``, ``tie`` or ``both_bad``,
    every item is held out once (:func:`outcome_folds`) and scored by a fit on the others."""
    if len(batches) != len(outcomes):
        raise ValueError(f"length mismatch: {len(batches)} batches, {len(outcomes)} labels")
    out: list[Verdict | None] = [None] * len(batches)
    for k, test in enumerate(outcome_folds(outcomes, n_folds=n_folds, seed=seed)):
        held_out = set(test.tolist())
        train = [i for i in range(len(batches)) if i not in held_out]
        method = method_factory()
        method.fit([batches[i] for i in train], [outcomes[i] for i in train])  # type: ignore[attr-defined]
        note = f"cross-fitted: fold {k + 1}/{n_folds}, fitted on {len(train)} items (tie labels included)"
        held = test.tolist()
        for i, verdict in zip(held, predict_many(method, [batches[i] for i in held]), strict=True):
            verdict.notes.append(note)
            out[i] = verdict
    return [v for v in out if v is not None]
