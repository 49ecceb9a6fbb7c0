"""``auto``: the fusion method chosen on the labels at hand, by cross-validation.

Why: which method fuses a panel best depends on the panel. A vote count is hard to beat when the
judges' stated confidence is noise and labels are few; stacking wins when confidence carries
information and labels are many; Dawid-Skene when one judge is much stronger than the rest and
the judges err independently; a method whose votes are counted as independent evidence is
overconfident when judges are correlated copies of each other, and a recalibrator fixes that.
No fixed default is the best on every panel (benchmarks/synthetic_panels.py), so ``auto`` asks
the labels.

**Candidates** (:data:`CANDIDATES`), simplest first: the label-free rules ``majority``,
``confidence_weighted`` (a weighted vote) and ``mean_probability``; ``dawid_skene`` (fitted on the
votes, labels unused); the learned ``offset_stacked`` and ``stacked``; each alone and followed by
a recalibrator of its confidence (``platt`` by default: ``<base>+platt``). Each has a
**complexity** (:func:`complexity`), its base's: 0 for a rule, 1 for Dawid-Skene, 2 for offset
stacking, 3 for stacking.

**The comparison** (``fit``): the labels are split into ``n_folds`` stratified folds (fewer when a
class has fewer items; below two folds there is nothing to compare and the fit is the cold-start
rule ``mean_probability``, :data:`FALLBACK`). Each base candidate's verdict on each item comes from
a model that never saw that item's label (:func:`~judgefuse.fusion.crossfit.cross_fit_predict`
on those folds; the label-free ones are simply applied), computed over the votes read once into
arrays where the method has a columnar form (the voting rules, ``dawid_skene``, ``stacked``,
``offset_stacked``; each tested against its per-item verdicts: the same numbers, offset stacking's
to about 1e-13), so the comparison does not rebuild every item's features in every fold. A
recalibrated candidate's confidence on
the items of one fold comes from a recalibrator fitted on the other folds' out-of-fold
(confidence, correct) pairs. Every item gets each candidate's **log-loss** ``-log P(label)``
(``P`` clipped to [1e-6, 1 - 1e-6]; an undecided item or an exact tie is 0.5).

**The choice** (:func:`choose`). Each base is taken recalibrated unless its raw confidence has the
lower out-of-fold log-loss: calibration out of sample is the default, not something the labels
must argue for (a recalibrator keeps the base's choice, so it costs no accuracy, and a vote
share of 1.0 or two correlated judges counted as independent evidence is exactly what it
fixes: agreeing votes are not called certain unless the labels say they are right that often).
Among the bases, the one with the lowest mean is the *best*; ``auto`` takes the **simplest**
base whose mean log-loss is within :data:`SE_RULE` (1) standard error of the best's, the
standard error of the paired per-item difference: a more complex method is taken only when the
labels show it better by more than the noise of the comparison. Among equally complex bases
within it, the lower mean wins. (A first version ranked ``<base>+platt`` one step more complex
than its base: with 80 labels the one-standard-error rule then kept raw ``majority`` in most
folds, whose vote share made the row's ECE 13% on the strong-judge panel.)

**Ties**. ``fit`` also takes ``tie`` labels (``fits_tie_labels``; ``both_bad``
labels are left out). The choice above is made and fitted on the A/B labels only; with at least
:data:`MIN_TIE_LABELS` tie labels a **tie model** is fitted besides: a logistic regression (L2,
:data:`TIE_PENALTY`) of "the label is a tie" on :data:`TIE_FEATURES` (the share of the item's
votes that say tie, the share that failed, the margin ``|logit P(A)|`` of the chosen method),
over the A/B-labelled items (with their out-of-fold P(A)) and the tie-labelled ones (P(A) of the
method fitted on the A/B labels, which saw no tie label). A verdict then answers **tie** (an
exact tie: no choice, confidence 0.5, routed to review in the service) where ``P(tie)`` is above
``(1 - P(tie)) x`` the chosen letter's confidence: where a tie is the likeliest of the three
answers. Offline, ``eval`` cross-fits such a method over the A/B- and tie-labelled items together
(:func:`~judgefuse.fusion.crossfit.cross_fit_outcomes`), so no tie label scores a model that saw
it. The service refits on A/B labels only, so a served ``auto`` has no tie model.

Cross-fitted comparisons by log-loss, not accuracy: log-loss sees both the choice and the
confidence, and it is what the recalibrator and the learners minimise. Offline (``judgefuse eval``)
``auto`` is itself cross-fitted, so its choice is made afresh in each fold on the training folds
only (nested cross-validation) and its row is an honest held-out number.

**The fit**: the chosen candidate fitted on every label (a recalibrated base's recalibrator is
fitted on the out-of-fold verdicts the comparison made, which are the ones its own fit would make;
the ``dawid_skene`` the comparison fitted on these votes is kept; ``stacked`` and
``offset_stacked`` are fitted over the vote arrays, :func:`~.columnar_stacking.fit_method`, and
save and serve as when fitted item by item). Verdicts
are the chosen method's, with ``method`` ``auto``, ``model_version`` auto's and a note naming
the choice. A recalibrator may map a confidence below one half (e.g. ``dawid_skene`` certain of
two copies of one judge outvoted by the rest: the labels say the copies are then wrong more often
than not); the verdict then answers the other letter with one minus that confidence, as its
``p_a`` says (the comparison scored ``p_a``, so the choice follows it).
:attr:`AutoFusion.chosen` names it, :attr:`AutoFusion.scores` gives every
candidate's numbers, ``to_params``/``from_params`` save and restore the choice with the chosen
method's own parameters, so the service can refit, store and serve ``auto`` like any learned
method.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, Self

import numpy as np
from numpy.typing import NDArray

from judgefuse.calibration.recalibration import make_recalibrator
from judgefuse.fusion.capabilities import method_params, restore_method
from judgefuse.fusion.columnar import COLUMNAR_METHODS, NONE, A, B, FusedColumns, VoteColumns, fuse_columns
from judgefuse.fusion.columnar_crossfit import fit_recalibrator
from judgefuse.fusion.columnar_dawid_skene import dawid_skene_columns
from judgefuse.fusion.columnar_stacking import columnar_stacking, cross_fit_stacking, fit_method
from judgefuse.fusion.crossfit import cross_fit_predict, fold_indices, label_array, predict_many
from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.fusion.offset_stacking import fit_offset_logistic
from judgefuse.fusion.recalibrated import Recalibrated
from judgefuse.fusion.registry import FusionMethod, NotEnoughLabels, NotFitted, fusion_method, get_method, requires_fit
from judgefuse.fusion.stacking import StackedFusion, check_labels
from judgefuse.fusion.verdict import TIE_NOTE, Verdict
from judgefuse.judges.types import JudgeVote

__all__ = [
    "BASES",
    "CANDIDATES",
    "FALLBACK",
    "SE_RULE",
    "AutoFusion",
    "CandidateScore",
    "choose",
    "complexity",
    "log_losses",
]

NAME = "auto"
PARAMS_FORMAT = "judgefuse.auto/1"
"""The ``format`` tag of :meth:`AutoFusion.to_params` output."""
BASES: dict[str, int] = {
    "majority": 0,
    "confidence_weighted": 0,
    "mean_probability": 0,
    "dawid_skene": 1,
    "offset_stacked": 2,
    "stacked": 3,
}
"""The base candidates and their complexity (module docstring), simplest first."""
RECALIBRATOR = "platt"
CANDIDATES = tuple(name for base in BASES for name in (base, f"{base}+{RECALIBRATOR}"))
"""Every candidate of the default ``auto``: each base alone and recalibrated."""
FALLBACK = "mean_probability"
"""The method of a fit whose labels cannot be split into two stratified folds: the cold-start rule."""
SE_RULE = 1.0
"""How many standard errors (of the paired per-item log-loss difference) a more complex candidate
must gain over a simpler one to be chosen: the one-standard-error rule."""
ROUNDING = 1e-12
"""A mean log-loss difference this small is rounding, not evidence. Offset stacking whose fit is
its rule alone gives the rule's per-item losses up to the last bits: a gain of 3.2e-17 with a
standard error of 1.8e-17 once passed the one-standard-error rule and chose offset_stacked over
mean_probability with identical predictions."""
LOSS_CLIP = 1e-6
MIN_TIE_LABELS = 10
"""Tie labels below which no tie model is fitted (auto then never answers a tie of its own)."""
TIE_PENALTY = 1.0
"""L2 penalty of the tie model's weights."""
TIE_FEATURES = ("tie_share", "failed_share", "margin")
"""The tie model's features per item: the share of its votes that say tie, the share that failed
(no letter, no tie), and ``|logit P(A)|`` of the chosen method (clipped at 10)."""


def tie_features(batches: Sequence[Sequence[JudgeVote]], p_a: NDArray[np.float64]) -> NDArray[np.float64]:
    """:data:`TIE_FEATURES` of each item (``p_a``: the chosen method's P(A) of each)."""
    shares = np.asarray(
        [
            (sum(v.tie for v in votes) / len(votes), sum(v.failed for v in votes) / len(votes)) if votes else (0.0, 1.0)
            for votes in batches
        ],
        dtype=float,
    ).reshape(len(batches), 2)
    p = np.clip(p_a, 1e-6, 1.0 - 1e-6)
    margin = np.minimum(np.abs(np.log(p) - np.log1p(-p)), 10.0)
    return np.column_stack([shares, margin])


def complexity(name: str) -> int:
    """A candidate's complexity: its base's (:data:`BASES`, 10 for a base not listed there)."""
    return BASES.get(name.partition("+")[0], 10)


@dataclass(frozen=True)
class CandidateScore:
    """One candidate's out-of-fold numbers in a fit of ``auto``."""

    name: str
    complexity: int
    log_loss: float
    """Mean per-item log-loss, out of fold."""
    difference: float
    """Mean paired difference of log-loss to the best candidate's (>= 0)."""
    standard_error: float
    """Standard error of that paired difference."""
    accuracy: float
    """Out-of-fold accuracy (an undecided item or an exact tie counts half)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def log_losses(p_a: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-item ``-log P(label)`` from P(A) (``y`` 1 for A), P clipped to [1e-6, 1 - 1e-6]."""
    p = np.clip(np.where(y == 1.0, p_a, 1.0 - p_a), LOSS_CLIP, 1.0 - LOSS_CLIP)
    return np.asarray(-np.log(p), dtype=float)


def _p_a(verdicts: Sequence[Verdict]) -> NDArray[np.float64]:
    """P(A) of each verdict (0.5 for an undecided verdict or an exact tie: they carry 0.5)."""
    return np.asarray([v.p_a if v.choice is not None else 0.5 for v in verdicts], dtype=float)


def _fused_p_a(fused: FusedColumns) -> NDArray[np.float64]:
    """:func:`_p_a` of verdicts given as arrays."""
    return np.asarray(np.where(fused.decided, fused.p_a, 0.5), dtype=float)


def _as_columns(name: str, verdicts: Sequence[Verdict]) -> FusedColumns:
    """Per-item verdicts as the arrays the comparison reads (answer A, B or none, confidence, P(A))."""
    answer = np.asarray([A if v.choice == "A" else B if v.choice == "B" else NONE for v in verdicts], dtype=np.int8)
    confidence = np.asarray([v.confidence for v in verdicts], dtype=float)
    counts = np.asarray([(v.n_valid, v.n_invalid) for v in verdicts], dtype=np.int64).reshape(len(verdicts), 2)
    tie_broken = np.asarray([v.tie_broken for v in verdicts], dtype=bool)
    return FusedColumns(name, answer, confidence, _p_a(verdicts), counts[:, 0], counts[:, 1], tie_broken)


def _accuracy(p_a: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    right = np.where(p_a == 0.5, 0.5, ((p_a > 0.5) == (y == 1.0)).astype(float))
    return float(right.mean())


def choose(
    losses: Mapping[str, NDArray[np.float64]], accuracy: Mapping[str, float] | None = None, *, se_rule: float = SE_RULE
) -> tuple[CandidateScore, list[CandidateScore]]:
    """(the chosen candidate, every candidate's score in the order of ``losses``) from each
    candidate's per-item out-of-fold log-loss (the same items in the same order). Each base's
    recalibrated candidate stands for it unless the raw one has the lower mean; of those, the
    simplest (:func:`complexity`, then the lower mean) whose mean paired difference to the
    best's is within ``se_rule`` standard errors of that difference, or within :data:`ROUNDING`
    (module docstring)."""
    if not losses:
        raise ValueError("no candidate to choose from")
    mean = {name: float(loss.mean()) for name, loss in losses.items()}
    best = min(losses, key=lambda name: mean[name])
    scores = []
    for name, loss in losses.items():
        diff = loss - losses[best]
        se = float(diff.std(ddof=1)) / math.sqrt(diff.size) if diff.size > 1 else 0.0
        right = float("nan") if accuracy is None else accuracy[name]
        scores.append(CandidateScore(name, complexity(name), mean[name], float(diff.mean()), se, right))
    standing: dict[str, CandidateScore] = {}  # base -> the variant that stands for it
    for score in scores:
        base, plus, _ = score.name.partition("+")
        held = standing.get(base)
        if held is None or score.log_loss < held.log_loss or (plus and score.log_loss == held.log_loss):
            standing[base] = score
    within = [score for score in standing.values()
              if score.difference <= se_rule * score.standard_error + ROUNDING]
    return min(within, key=lambda score: (score.complexity, score.log_loss)), scores  # the best is within


@fusion_method(NAME)
class AutoFusion:
    """The candidate chosen on the labels by cross-validated log-loss (module docstring)."""

    requires_fit = True
    fits_tie_labels = True
    """``fit`` takes ``tie`` (and ``both_bad``) labels beside A and B: the tie model (module docstring)."""
    eval_by_default = False
    """Not among ``judgefuse eval``'s default rows: cross-fitted, each fold refits every candidate in
    five inner folds (``eval --methods auto`` on JudgeBench's 350 items: 7.9 s of CPU in all, against
    6.4 s for ``--methods offset_stacked``, one BLAS thread; benchmarks/results/refit_method_cost.txt);
    ``--methods ... auto`` shows it."""

    def __init__(
        self,
        *,
        bases: Sequence[str] = tuple(BASES),
        recalibrator: str = RECALIBRATOR,
        n_folds: int = 5,
        seed: int = 0,
        min_labels: int = 10,
        se_rule: float = SE_RULE,
        name: str = NAME,
    ):
        if n_folds < 2:
            raise ValueError("n_folds must be >= 2")
        if se_rule < 0:
            raise ValueError("se_rule must be >= 0")
        self.name = name
        self.bases = tuple(bases)
        self.recalibrator = recalibrator
        self.n_folds = n_folds
        self.seed = seed
        self.min_labels = min_labels
        self.se_rule = se_rule
        self.chosen: str | None = None
        """The candidate the last fit chose (None before a fit)."""
        self.scores: list[CandidateScore] = []
        """Every compared candidate's out-of-fold numbers, in :data:`CANDIDATES` order."""
        self.skipped: dict[str, str] = {}
        """Candidates that could not be fitted on these labels, and why."""
        self.reason = ""
        """How the choice was made, in a sentence."""
        self.n_labels = 0
        self.tie_model: dict[str, Any] | None = None
        """The tie model's intercept and weights (:data:`TIE_FEATURES`), None without tie labels."""
        self.model: FusionMethod | None = None
        self.model_version: str | None = None

    @property
    def fitted(self) -> bool:
        return self.model is not None

    @property
    def chosen_base(self) -> FusionMethod | None:
        """The chosen candidate's base method, fitted (None before a fit): :attr:`model` itself,
        or for a recalibrated candidate (``<base>+platt``) the base it recalibrates, e.g. the
        stacking model whose ``feature_names`` and ``coefficients`` a reader inspects whatever
        recalibrator maps its confidence."""
        return self.model.base if isinstance(self.model, Recalibrated) else self.model

    @property
    def candidates(self) -> tuple[str, ...]:
        return tuple(name for base in self.bases for name in (base, f"{base}+{self.recalibrator}"))

    # -- the comparison ---------------------------------------------------------------------

    def fit(self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[str]) -> Self:
        """Choose and fit on the A/B labels (module docstring); with :data:`MIN_TIE_LABELS` or
        more ``tie`` labels among ``labels``, fit the tie model too (``both_bad`` labels are left
        out: neither answer is acceptable, which is not an outcome to predict)."""
        if len(batches) != len(labels):
            raise ValueError(f"length mismatch: {len(batches)} batches, {len(labels)} labels")
        unknown = sorted({repr(label) for label in labels if label not in ("A", "B", "tie", "both_bad")})
        if unknown:
            raise ValueError(f"labels must be 'A', 'B', 'tie' or 'both_bad', got {', '.join(unknown[:5])}")
        decided = [i for i, label in enumerate(labels) if label in ("A", "B")]
        tied = [i for i, label in enumerate(labels) if label == "tie"]
        letters: list[Literal["A", "B"]] = [labels[i] for i in decided]  # type: ignore[misc]
        oof_p_a = self._fit_decided([batches[i] for i in decided], letters)
        self.tie_model = None
        if oof_p_a is not None and len(tied) >= MIN_TIE_LABELS:
            self._fit_ties([batches[i] for i in decided], oof_p_a, [batches[i] for i in tied])
        self.model_version = self._version()
        return self

    def _fit_decided(
        self, batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Literal["A", "B"]]
    ) -> NDArray[np.float64] | None:
        """The choice and its fit on A/B labels; the chosen candidate's out-of-fold P(A) per item
        (None for the fallback, which compared nothing)."""
        y = check_labels(batches, labels, min_labels=self.min_labels).astype(float)
        self.n_labels = int(y.size)
        k = min(self.n_folds, int(min(y.sum(), y.size - y.sum())))
        if k < 2:
            self._settle(FALLBACK, batches, labels, k)
            self.scores, self.skipped = [], {}
            self.reason = f"{int(y.sum())} A and {int(y.size - y.sum())} B labels: too few to compare; cold-start rule"
            return None
        folds = fold_indices(labels, n_folds=k, seed=self.seed)
        columns = VoteColumns.from_batches(batches)
        losses: dict[str, NDArray[np.float64]] = {}
        accuracy: dict[str, float] = {}
        out_of_fold: dict[str, FusedColumns] = {}
        applied: dict[str, FusionMethod] = {}
        p_a_of: dict[str, NDArray[np.float64]] = {}
        self.skipped = {}
        for base in self.bases:
            try:
                fused = self._out_of_fold(base, batches, labels, columns, k, applied)
            except NotEnoughLabels as exc:
                self.skipped[base] = str(exc)
                continue
            out_of_fold[base] = fused
            p_a = p_a_of[base] = _fused_p_a(fused)
            losses[base], accuracy[base] = log_losses(p_a, y), _accuracy(p_a, y)
            recalibrated = f"{base}+{self.recalibrator}"
            try:
                p_a = p_a_of[recalibrated] = self._recalibrated_out_of_fold(fused, y, folds)
            except NotEnoughLabels as exc:
                self.skipped[recalibrated] = str(exc)
                continue
            losses[recalibrated], accuracy[recalibrated] = log_losses(p_a, y), _accuracy(p_a, y)
        if not losses:
            raise NotEnoughLabels(
                "no candidate of auto could be fitted: "
                + "; ".join(f"{name}: {why}" for name, why in self.skipped.items())
            )
        ordered = {name: losses[name] for name in self.candidates if name in losses}
        chosen, self.scores = choose(ordered, accuracy, se_rule=self.se_rule)
        best = min(self.scores, key=lambda score: score.log_loss)
        self.reason = (
            f"best {best.name} (log-loss {best.log_loss:.4f}); chose {chosen.name}, the simplest within "
            f"{self.se_rule:g} SE of it (log-loss {chosen.log_loss:.4f}, +{chosen.difference:.4f} +- "
            f"{chosen.standard_error:.4f}); {len(self.scores)} candidates, {k}-fold"
        )
        self._settle(chosen.name, batches, labels, k, (columns, out_of_fold, applied))
        return p_a_of[chosen.name]

    def _out_of_fold(
        self,
        base: str,
        batches: Sequence[Sequence[JudgeVote]],
        labels: Sequence[Literal["A", "B"]],
        columns: VoteColumns,
        k: int,
        applied: dict[str, FusionMethod],
    ) -> FusedColumns:
        """``base``'s verdict on every item from a model that never saw its label: what
        :func:`~judgefuse.fusion.crossfit.cross_fit_predict` gives on ``k`` folds, over the vote
        arrays where the method has a columnar form (a voting rule, ``dawid_skene``, ``stacked``,
        ``offset_stacked``: :mod:`.columnar`, :mod:`.columnar_dawid_skene`,
        :mod:`.columnar_stacking`, each tested against the per-item verdicts). A label-free
        method fitted on the votes (``dawid_skene``) is kept in ``applied`` for :meth:`_settle`."""
        if base in COLUMNAR_METHODS:
            return fuse_columns(base, columns)
        probe = get_method(base)
        if type(probe) is DawidSkeneFusion and probe.model is None:
            fused = dawid_skene_columns(probe, columns)  # fitted on these items' votes, as predict does
            if probe.model is not None:  # unfitted (no observation): a chosen one is fitted as before
                applied[base] = probe
            return fused
        if columnar_stacking(probe):
            return cross_fit_stacking(base, columns, label_array(labels), n_folds=k, seed=self.seed)
        return _as_columns(base, cross_fit_predict(base, batches, labels, n_folds=k, seed=self.seed))

    def _fit_ties(
        self,
        decided: Sequence[Sequence[JudgeVote]],
        decided_p_a: NDArray[np.float64],
        tied: Sequence[Sequence[JudgeVote]],
    ) -> None:
        """The tie model: P(tie label) from each item's votes and the chosen method's P(A), fitted
        on the A/B-labelled items (their out-of-fold P(A)) against the tie-labelled ones (P(A) of
        the method fitted on the A/B labels, which never saw a tie label)."""
        assert self.model is not None
        tied_p_a = _p_a(predict_many(self.model, tied))
        x = np.vstack([tie_features(decided, decided_p_a), tie_features(tied, tied_p_a)])
        y = np.concatenate([np.zeros(len(decided)), np.ones(len(tied))])
        intercept, weights = fit_offset_logistic(x, y, np.zeros(y.size), TIE_PENALTY, intercept_penalty=1e-6)
        self.tie_model = {"intercept": intercept, "weights": [float(w) for w in weights], "n_tie_labels": len(tied)}

    def _recalibrated_out_of_fold(
        self, fused: FusedColumns, y: NDArray[np.float64], folds: Sequence[NDArray[np.int64]]
    ) -> NDArray[np.float64]:
        """P(A) of the recalibrated candidate: each fold's decided confidences mapped by a
        recalibrator fitted on the other folds' decided (confidence, correct) pairs."""
        choice_a = fused.answer == A
        decided = fused.decided
        confidence = fused.confidence
        correct = (choice_a == (y == 1.0)).astype(float)
        p_a = _fused_p_a(fused)
        for held in folds:
            train = np.ones(y.size, dtype=bool)
            train[held] = False
            train &= decided
            if int(train.sum()) < self.min_labels:
                raise NotEnoughLabels(f"only {int(train.sum())} decided verdicts to recalibrate on in a fold")
            recalibrator = make_recalibrator(self.recalibrator).fit(confidence[train], correct[train])
            target = held[decided[held]]
            if target.size:
                mapped = np.clip(recalibrator.transform(confidence[target]), 0.0, 1.0)
                p_a[target] = np.where(choice_a[target], mapped, 1.0 - mapped)
        return p_a

    def _settle(
        self,
        chosen: str,
        batches: Sequence[Sequence[JudgeVote]],
        labels: Sequence[Literal["A", "B"]],
        k: int,
        comparison: tuple[VoteColumns, Mapping[str, FusedColumns], Mapping[str, FusionMethod]] | None = None,
    ) -> None:
        """Fit ``chosen`` on every label and stamp the version. ``comparison``: the vote arrays
        (``stacked`` and ``offset_stacked`` are fitted over them, :func:`.columnar_stacking.fit_method`),
        each base's verdicts of the comparison (a recalibrator is fitted on the chosen base's,
        which are what ``Recalibrated.fit`` would compute) and the label-free bases it fitted on
        these votes (``dawid_skene``), reused rather than fitted again on the same votes."""
        base, plus, recalibrator = chosen.partition("+")
        columns, out_of_fold, applied = comparison if comparison is not None else (None, {}, {})
        fused = out_of_fold.get(base)
        reused = applied.get(base)
        method: FusionMethod
        if plus:
            wrapped = Recalibrated(
                reused if reused is not None else get_method(base),
                make_recalibrator(recalibrator),
                min_labels=self.min_labels,
                n_folds=max(k, 2),
                seed=self.seed,
            )
            if fused is None:
                wrapped.fit(batches, labels)
            else:
                check_labels(batches, labels, min_labels=self.min_labels)
                if requires_fit(wrapped.base):
                    self._fit_base(wrapped.base, batches, labels, columns)
                fit_recalibrator(wrapped, fused, label_array(labels))
            method = wrapped
        elif reused is not None:
            method = reused
        else:
            method = get_method(chosen)
            if callable(getattr(method, "fit", None)):  # a learned method; dawid_skene fits on the votes
                self._fit_base(method, batches, labels, columns)
        self.chosen = chosen
        self.model = method
        self.model_version = self._version()

    @staticmethod
    def _fit_base(
        method: FusionMethod,
        batches: Sequence[Sequence[JudgeVote]],
        labels: Sequence[Literal["A", "B"]],
        columns: VoteColumns | None,
    ) -> None:
        """``method.fit(batches, labels)``; ``stacked`` and ``offset_stacked`` over ``columns``
        when given (the same fit: :func:`.columnar_stacking.fit_method`)."""
        if columns is not None and isinstance(method, StackedFusion) and columnar_stacking(method):
            fit_method(method, columns, label_array(labels))
        else:
            method.fit(batches, labels)  # type: ignore[attr-defined]

    def _version(self) -> str:
        state: dict[str, Any] = {
            "chosen": self.chosen,
            "model": getattr(self.model, "model_version", None) or self.chosen,
        }
        if getattr(self, "tie_model", None) is not None:
            state["tie_model"] = self.tie_model
        return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:12]

    # -- predict ----------------------------------------------------------------------------

    def predict(self, batches: Sequence[Sequence[JudgeVote]]) -> list[Verdict]:
        """The chosen method's verdicts, named ``auto`` and stamped with auto's version."""
        if self.model is None:
            raise NotFitted(f"{self.name} must be fitted before use")
        note = f"auto: {self.chosen}"
        verdicts = [self._stamp(v, note) for v in predict_many(self.model, batches)]
        if self.tie_model is None:
            return verdicts
        p_a = _p_a(verdicts)
        weights = np.asarray(self.tie_model["weights"], dtype=float)
        z = float(self.tie_model["intercept"]) + tie_features(batches, p_a) @ weights
        p_tie = 1.0 / (1.0 + np.exp(-np.clip(z, -35.0, 35.0)))
        return [
            self._tie(v, float(pt)) if v.choice is not None and pt > (1.0 - pt) * v.confidence else v
            for v, pt in zip(verdicts, p_tie.tolist(), strict=True)
        ]

    def predict_p_a(self, batches: Sequence[Sequence[JudgeVote]]) -> NDArray[np.float64]:
        """P(A) of each batch's verdict (0.5 where it answers tie), from one :meth:`predict` of
        them all rather than a call per item."""
        return np.asarray([v.p_a for v in self.predict(batches)], dtype=float)

    def _tie(self, verdict: Verdict, p_tie: float) -> Verdict:
        """An exact tie: the tie model's P(tie) is above the chosen letter's P(letter and not tie)."""
        letter = (1.0 - p_tie) * verdict.confidence
        return verdict.model_copy(update={
            "choice": None, "confidence": 0.5, "p_a": 0.5, "tie_broken": False,
            "notes": [TIE_NOTE, *verdict.notes, f"auto: tie predicted: P(tie) {p_tie:.3f} > P({verdict.choice}) {letter:.3f}"],
        })  # fmt: skip

    def _stamp(self, verdict: Verdict, note: str) -> Verdict:
        update: dict[str, Any] = {
            "method": self.name,
            "model_version": self.model_version,
            "notes": [*verdict.notes, note],
        }
        if verdict.choice is not None and verdict.confidence < 0.5:
            # a recalibrated confidence below one half: P(A) says the other answer (module docstring)
            update["choice"] = "B" if verdict.choice == "A" else "A"
            update["confidence"] = 1.0 - verdict.confidence
            update["notes"].append(
                f"recalibrated confidence {verdict.confidence:.4f} in {verdict.choice}: answered the other"
            )
        return verdict.model_copy(update=update)

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        return self.predict([votes])[0]

    def describe(self) -> str:
        """What the last fit chose and why (empty before a fit)."""
        return f"{self.chosen}: {self.reason}" if self.chosen else ""

    # -- parameters to save and restore -----------------------------------------------------

    def to_params(self) -> dict[str, Any]:
        """JSON-ready parameters (``NotFitted`` before ``fit``): the choice, the chosen method's
        own parameters (None for a label-free rule, rebuilt by name), the comparison's numbers."""
        if self.model is None or self.chosen is None:
            raise NotFitted(f"{self.name} must be fitted before its parameters are saved")
        saves = callable(getattr(self.model, "to_params", None)) and (
            requires_fit(self.model) or getattr(self.model, "fitted", False)
        )
        return {
            "format": PARAMS_FORMAT,
            "chosen": self.chosen,
            "chosen_params": method_params(self.model) if saves else None,
            "bases": list(self.bases),
            "recalibrator": self.recalibrator,
            "n_folds": self.n_folds,
            "seed": self.seed,
            "min_labels": self.min_labels,
            "se_rule": self.se_rule,
            "n_labels": self.n_labels,
            "reason": self.reason,
            "scores": [score.as_dict() for score in self.scores],
            "skipped": dict(self.skipped),
            "tie_model": self.tie_model,
            "model_version": self.model_version,
        }

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> AutoFusion:
        """A fitted ``auto`` from :meth:`to_params` output (``ValueError`` for another format, or
        a chosen method that needs parameters and has none)."""
        if params.get("format") != PARAMS_FORMAT:
            raise ValueError(f"unknown auto model format {params.get('format')!r}")
        method = cls(
            bases=[str(b) for b in params["bases"]],
            recalibrator=str(params["recalibrator"]),
            n_folds=int(params["n_folds"]),
            seed=int(params["seed"]),
            min_labels=int(params["min_labels"]),
            se_rule=float(params["se_rule"]),
        )
        chosen = str(params["chosen"])
        chosen_params = params.get("chosen_params")
        if chosen_params is not None:
            model = restore_method(chosen, chosen_params)
        else:
            model = get_method(chosen)
            if requires_fit(model):
                raise ValueError(f"auto model: {chosen!r} must be fitted but no parameters were saved")
        method.chosen, method.model = chosen, model
        method.n_labels = int(params.get("n_labels", 0))
        method.reason = str(params.get("reason", ""))
        method.scores = [CandidateScore(**score) for score in params.get("scores", [])]
        method.skipped = {str(k): str(v) for k, v in dict(params.get("skipped", {})).items()}
        tie_model = params.get("tie_model")
        if tie_model is not None:
            if len(tie_model["weights"]) != len(TIE_FEATURES):
                raise ValueError(f"auto model: the tie model has {len(tie_model['weights'])} weights, not "
                                 f"{len(TIE_FEATURES)}")  # fmt: skip
            method.tie_model = {"intercept": float(tie_model["intercept"]), "weights": [float(w) for w in
                                tie_model["weights"]], "n_tie_labels": int(tie_model.get("n_tie_labels", 0))}  # fmt: skip
        method.model_version = method._version()
        return method

    def __repr__(self) -> str:
        state = f"chose {self.chosen} ({self.model_version})" if self.chosen else "unfitted"
        return f"AutoFusion({state})"
