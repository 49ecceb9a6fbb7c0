"""Evaluate every judge and every fusion method over labelled judged items.

This is the offline half of the product: the same votes the service would fuse, replayed
from recorded benchmarks or from a ``judgefuse judge`` run, scored with every calibration
metric. Learned methods (stacking, recalibrated voting) are **cross-fitted**: each item is
scored by a model fitted on the other folds only, so their rows are honest held-out numbers
and comparable with the voting rules that never see a label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from judgefuse import calibration
from judgefuse.calibration.bootstrap import INTERVAL_METHOD, BootstrapInterval, bootstrap_intervals_many
from judgefuse.calibration.builtin_metrics import BUILTIN_METRICS
from judgefuse.calibration.metric_registry import registered_metrics
from judgefuse.errors import InputError
from judgefuse.evaluation.agreement import RowAgreement, panel_alpha, row_agreement
from judgefuse.evaluation.columnar_rows import columnar_ties, fuse_columnar, has_columnar_form
from judgefuse.evaluation.scoring import (
    ScoredRow,
    judge_names,
    score_columns,
    score_judge_columns,
    score_verdicts,
)
from judgefuse.evaluation.ties import TieReport, has_ties, judge_ties_columns, tie_report, verdict_outcome
from judgefuse.evaluation.vote_table import ItemColumns
from judgefuse.fusion import NotEnoughLabels, cross_fit_predict, get_method, replayable_methods, requires_fit
from judgefuse.fusion.columnar import VoteColumns
from judgefuse.fusion.crossfit import cross_fit_outcomes, predict_many
from judgefuse.fusion.judge_outliers import JudgeWarning, judge_warnings
from judgefuse.fusion.registry import FusionMethod, LearnedFusionMethod, factory_of
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgedItem, Letter

REFERENCE_METHOD = "majority"
RECALIBRATED_DEFAULTS = ("majority+platt", "majority+isotonic")
"""Recalibrated voting shown by default beside stacking: the cheapest learned fix."""


def default_methods() -> tuple[str, ...]:
    """Every method that can replay recorded votes, plus the recalibrated-majority variants; not
    those whose factory says ``eval_by_default = False`` (``auto``: cross-fitting it refits every
    candidate in every fold, several times the cost of every other row: ask for it by name)."""
    shown = [name for name in replayable_methods() if getattr(factory_of(name), "eval_by_default", True)]
    return (*shown, *RECALIBRATED_DEFAULTS)
CI_METRICS = tuple(metric.name for metric in BUILTIN_METRICS if metric.interval)
"""The built-in metrics with a bootstrap interval (accuracy, ECE); :func:`ci_metrics` adds plugins'."""


def ci_metrics() -> tuple[str, ...]:
    """Every registered metric declared with ``interval=True``."""
    return tuple(metric.name for metric in registered_metrics() if metric.interval)


CI_METHOD = INTERVAL_METHOD
"""How every ``ci`` in a report is made (95%): printed in the tables' captions and the JSON."""


class EvaluationError(InputError, ValueError):
    """The items cannot be evaluated (no labels, no votes)."""


@dataclass(frozen=True)
class EvaluationOptions:
    """Knobs of one evaluation run; the defaults are the paper's (10 bins, eps 0.1)."""

    methods: tuple[str, ...] | None = None
    n_bins: int = 10
    eps: float = 0.1
    n_folds: int = 5
    n_bootstrap: int = 1000
    seed: int = 0


@dataclass
class RowReport:
    """Everything the report says about one judge or method."""

    row: ScoredRow
    metrics: dict[str, float]
    ci: dict[str, tuple[float, float]]
    reliability: list[calibration.ReliabilityBin]
    per_category: dict[str, dict[str, float]]
    helped_harmed: calibration.HelpedHarmed | None = None
    intervals: dict[str, BootstrapInterval] = field(default_factory=dict)
    """The bootstrap intervals behind ``ci`` (method, debiased value); each contains its metric."""


@dataclass
class Evaluation:
    """The result of :func:`evaluate`: one report per row, judges first, then methods."""

    n_items: int
    n_labelled: int
    rows: list[RowReport]
    skipped_methods: dict[str, str] = field(default_factory=dict)
    options: EvaluationOptions = field(default_factory=EvaluationOptions)
    agreement: list[RowAgreement] = field(default_factory=list)
    """Per row, agreement with the labels (kappa, confusion, confident disagreements)."""
    judges_alpha: float | None = None
    """Krippendorff's alpha among the judges (nominal), None when undefined."""
    ties: list[TieReport] = field(default_factory=list)
    """Per row, how ties count (:mod:`.ties`): the metrics above are on decided (A/B) labels."""
    judge_warnings: list[JudgeWarning] = field(default_factory=list)
    """Judges that disagree with the rest of the panel far more than chance allows, found on every
    item's votes without labels (:mod:`judgefuse.fusion.judge_outliers`): the label-free methods
    weigh them like any other judge."""
    chosen: dict[str, str] = field(default_factory=dict)
    """Per row of a method that chooses among others when fitted (``auto``), what it chose in the
    cross-fitting folds, e.g. ``stacked+platt in 4 of 5 folds, offset_stacked in 1``."""

    @property
    def has_ties(self) -> bool:
        """True when a label or an answer is a tie (or a label is both_bad)."""
        return has_ties(self.ties)

    @property
    def categories(self) -> list[str]:
        seen: dict[str, None] = {}
        for report in self.rows:
            for name in report.per_category:
                seen.setdefault(name, None)
        return sorted(seen)

    def row(self, name: str) -> RowReport:
        for report in self.rows:
            if report.row.name == name:
                return report
        raise KeyError(name)


def evaluate(
    items: Sequence[JudgedItem],
    *,
    options: EvaluationOptions | None = None,
    progress: Callable[[str], None] | None = None,
    fused: Mapping[str, Sequence[Verdict]] | None = None,
) -> Evaluation:
    """Score every judge in ``items`` and every fusion method over the labelled items.

    ``fused`` adds rows made elsewhere, one verdict per labelled item in order (the recorded
    answers of the fuser LLM, :mod:`judgefuse.evaluation.fuser_eval`): they sit with the methods.
    """
    options = options or EvaluationOptions()
    labelled = [judged for judged in items if judged.item.label is not None]
    if not labelled:
        raise EvaluationError("no labelled items: evaluation needs items with a label (A or B)")
    if not any(judged.votes for judged in labelled):
        raise EvaluationError("no votes on the labelled items: nothing to evaluate")
    step = progress or (lambda _name: None)

    undecided = [judged for judged in items if judged.item.tie_label is not None]
    # every item's votes as arrays, read once: the judges' rows, the voting rules, their
    # recalibrated variants and dawid_skene work on them (judgefuse.fusion.columnar), the
    # other methods item by item
    columns = VoteColumns.from_batches([judged.votes for judged in labelled])
    undecided_columns = VoteColumns.from_batches([judged.votes for judged in undecided])
    scored: list[ScoredRow] = []
    ties: list[TieReport] = []
    for name in judge_names(labelled):
        step(name)
        scored.append(score_judge_columns(name, labelled, columns))
        ties.append(judge_ties_columns(name, [(labelled, columns), (undecided, undecided_columns)]))

    skipped: dict[str, str] = {}
    chosen: dict[str, str] = {}
    for name in options.methods or default_methods():
        step(name)
        if _has_columnar_form(name):
            labels: list[Letter] = [judged.item.label for judged in labelled]  # type: ignore[misc]
            try:
                arrays = fuse_columnar(name, labels, columns, n_folds=options.n_folds, seed=options.seed)
            except NotEnoughLabels as exc:
                skipped[name] = str(exc)
                continue
            scored.append(score_columns(name, labelled, arrays, columns))
            tail = fuse_columnar(
                name, labels, columns, n_folds=options.n_folds, seed=options.seed, undecided=undecided_columns
            ) if undecided else None
            ties.append(columnar_ties(name, ItemColumns.from_items(labelled), arrays, ItemColumns.from_items(undecided),
                                      tail))
            continue
        fitted: list[FusionMethod] = []
        three_way = any(judged.item.tie_label == "tie" for judged in undecided) and bool(
            getattr(get_method(name), "fits_tie_labels", False)
        )
        try:
            if three_way:  # tie labels are training labels too: every item cross-fitted
                verdicts, undecided_verdicts = _fuse_with_ties(name, labelled, undecided, options, fitted)
            else:
                verdicts = _fuse(name, labelled, options, fitted)
                undecided_verdicts = _fuse_undecided(name, labelled, undecided)
        except NotEnoughLabels as exc:
            skipped[name] = str(exc)
            continue
        if choices := choice_summary(fitted):
            chosen[name] = choices
        scored.append(score_verdicts(name, labelled, verdicts))
        ties.append(_method_ties(name, labelled, verdicts, undecided, undecided_verdicts))
    for name, made in (fused or {}).items():
        step(name)
        scored.append(score_verdicts(name, labelled, made))
        ties.append(_method_ties(name, labelled, made, [], []))

    reference = next((row for row in scored if row.name == REFERENCE_METHOD), None)
    # every row's intervals from one shared stream of resamples (bootstrap_intervals_many: the
    # same resamples each row would draw alone, drawn once instead of once per row and metric)
    intervals = bootstrap_intervals_many(
        [(row.confidence, row.correct) for row in scored], ci_metrics(), n_resamples=options.n_bootstrap,
        seed=options.seed, n_bins=options.n_bins, eps=options.eps,
    )
    reports = [_report(row, reference, options, made) for row, made in zip(scored, intervals, strict=True)]
    agreement = [row_agreement(row, labelled) for row in scored]
    alpha = panel_alpha(labelled, judge_names(labelled))
    warnings = judge_warnings([judged.votes for judged in items])
    return Evaluation(len(items), len(labelled), reports, skipped, options, agreement, alpha, ties, warnings, chosen)


def _has_columnar_form(name: str) -> bool:
    """True for a method fused over arrays, not item by item (:func:`.columnar_rows.has_columnar_form`)."""
    return has_columnar_form(name, get_method)


def _method_ties(
    name: str,
    labelled: Sequence[JudgedItem],
    verdicts: Sequence[Verdict],
    undecided: Sequence[JudgedItem],
    undecided_verdicts: Sequence[Verdict],
) -> TieReport:
    answers = [verdict_outcome(verdict) for verdict in [*verdicts, *undecided_verdicts]]
    labels = [judged.item.outcome for judged in [*labelled, *undecided[: len(undecided_verdicts)]]]
    return tie_report(name, answers, labels)  # type: ignore[arg-type]


def _fuse_undecided(name: str, labelled: Sequence[JudgedItem], undecided: Sequence[JudgedItem]) -> list[Verdict]:
    """Verdicts on the tie-labelled items: a learned method fitted on every A/B label (no tie label
    is a training label, so none is scored by a model that saw it), a label-free one applied."""
    if not undecided:
        return []
    method = get_method(name)
    batches = [judged.votes for judged in undecided]
    if requires_fit(method) and isinstance(method, LearnedFusionMethod):
        labels: list[Letter] = [judged.item.label for judged in labelled]  # type: ignore[misc]
        method.fit([judged.votes for judged in labelled], labels)
        return predict_many(method, batches)
    # label-free (dawid_skene fits on what it is given): every item, as for the labelled rows
    return predict_many(method, [*(judged.votes for judged in labelled), *batches])[len(labelled):]


def _fuse(
    name: str, items: Sequence[JudgedItem], options: EvaluationOptions, fitted: list[FusionMethod] | None = None
) -> list[Verdict]:
    """Cross-fitted verdicts of a learned method (each fold's fitted method appended to
    ``fitted``), a label-free method's verdicts on every item."""
    method = get_method(name)
    batches = [judged.votes for judged in items]
    if requires_fit(method):
        labels: list[Letter] = [judged.item.label for judged in items]  # type: ignore[misc]
        made = fitted if fitted is not None else []

        def fresh() -> FusionMethod:
            made.append(get_method(name))
            return made[-1]

        return cross_fit_predict(fresh, batches, labels, n_folds=options.n_folds, seed=options.seed)
    return predict_many(method, batches)  # a label-free method (dawid_skene) fits on every item here


def _fuse_with_ties(
    name: str,
    labelled: Sequence[JudgedItem],
    undecided: Sequence[JudgedItem],
    options: EvaluationOptions,
    fitted: list[FusionMethod],
) -> tuple[list[Verdict], list[Verdict]]:
    """Cross-fitted verdicts of a method that learns from tie labels (``fits_tie_labels``) on the
    A/B-labelled and the tie/both_bad-labelled items together (each held out once, the folds
    stratified by outcome): (the labelled items' verdicts, the undecided items')."""
    batches = [judged.votes for judged in [*labelled, *undecided]]
    outcomes = [judged.item.outcome or "" for judged in [*labelled, *undecided]]

    def fresh() -> FusionMethod:
        fitted.append(get_method(name))
        return fitted[-1]

    verdicts = cross_fit_outcomes(fresh, batches, outcomes, n_folds=options.n_folds, seed=options.seed)
    return verdicts[: len(labelled)], verdicts[len(labelled) :]


def choice_summary(fitted: Sequence[FusionMethod]) -> str:
    """What the folds' fitted methods chose, for a method that chooses (a ``chosen`` attribute,
    e.g. ``auto``): ``stacked+platt in 4 of 5 folds, offset_stacked in 1``; "" for any other."""
    choices = [chosen for method in fitted if isinstance(chosen := getattr(method, "chosen", None), str)]
    if not choices:
        return ""
    counts = Counter(choices).most_common()
    first, n_first = counts[0]
    parts = [f"{first} in {n_first} of {len(choices)} folds", *(f"{name} in {n}" for name, n in counts[1:])]
    return ", ".join(parts)


def row_report(
    row: ScoredRow, reference: ScoredRow | None, options: EvaluationOptions, intervals: dict[str, BootstrapInterval]
) -> RowReport:
    """One row's report: metrics, intervals, reliability, per category, helped/harmed vs ``reference``."""
    return _report(row, reference, options, intervals)


def _report(
    row: ScoredRow, reference: ScoredRow | None, options: EvaluationOptions, intervals: dict[str, BootstrapInterval]
) -> RowReport:
    conf, correct = row.confidence, row.correct
    metrics = calibration.summarize(conf, correct, n_bins=options.n_bins, eps=options.eps)
    ci = {metric: (interval.low, interval.high) for metric, interval in intervals.items()}
    per_category: dict[str, dict[str, float]] = {}
    if np.any(row.categories != ""):
        per_category = calibration.per_category(conf, correct, row.categories, groups=_category_groups(row.categories))
    helped = None
    if reference is not None and row.kind == "fusion" and row.name != reference.name:
        helped = _helped_harmed(row, reference)
    return RowReport(
        row=row,
        metrics=metrics,
        ci=ci,
        reliability=calibration.reliability_diagram(conf, correct, n_bins=options.n_bins),
        per_category=per_category,
        helped_harmed=helped,
        intervals=intervals,
    )


_GROUPS: list[tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]] = []


def _category_groups(categories: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(categories, return_inverse=True)``, kept for the last array asked about: every
    method's row of a table shares one categories array (``decided_categories``)."""
    if _GROUPS and _GROUPS[0][0] is categories:
        return _GROUPS[0][1]
    found = np.unique(categories, return_inverse=True)
    _GROUPS[:] = [(categories, (found[0], found[1]))]
    return found[0], found[1]


def _helped_harmed(row: ScoredRow, reference: ScoredRow) -> calibration.HelpedHarmed:
    """Counts over the items both rows scored, aligned by item position."""
    if row.item_index.size == reference.item_index.size and np.array_equal(row.item_index, reference.item_index):
        if bool((np.diff(row.item_index) > 0).all()):  # the same ascending items: intersect1d's own answer
            return calibration.helped_harmed(row.correct, reference.correct)
    common, in_row, in_ref = np.intersect1d(
        row.item_index, reference.item_index, assume_unique=True, return_indices=True
    )
    del common
    return calibration.helped_harmed(row.correct[in_row], reference.correct[in_ref])
