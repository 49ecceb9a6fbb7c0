"""``judgefuse tune``: the auto-accept threshold with a precision guarantee, from labelled data.

    judgefuse tune PATH... [--format F] [--target 0.9] [--delta 0.1] [--min-count 30]
                           [--method NAME | --judge NAME] [--folds 5] [--seed 0] [--json OUT]

Loads labelled judged items (:func:`judgefuse.evaluation.loaders.load`), takes the
confidence/correctness of one fusion method (default ``majority``; a learned method such as
``stacked`` or ``majority+isotonic`` is cross-fitted so no item is scored by a model that saw its
label) or of one judge, scored by the same rule as ``judgefuse eval``
(:mod:`judgefuse.evaluation.scoring`), and runs
:func:`judgefuse.calibration.thresholds.tune_threshold`. Prints the threshold, coverage,
precision with its lower bound, expected errors and review load, or says that no threshold
qualifies (everything goes to review) and why.

``--cascade J1,J2,...`` tunes a cascade instead (:mod:`judgefuse.fusion.cascade`): stages
cheapest first, each stage's threshold tuned on the labelled items that reach it, then
``--fallback review|panel``; prints every stage's threshold, the coverage and calls per item.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from judgefuse.calibration.thresholds import ThresholdReport, tune_threshold
from judgefuse.errors import InputError
from judgefuse.evaluation.arguments import (
    add_source_arguments,
    float_in,
    int_at_least,
    load_sources,
    load_table_sources,
    output_path,
)
from judgefuse.evaluation.atomic import write_atomic
from judgefuse.evaluation.blas_threads import one_blas_thread
from judgefuse.evaluation.display import compact_table, fit, legend, output_console, short_names
from judgefuse.evaluation.scoring import (
    ScoredRow,
    judge_names,
    score_columns,
    score_judge_columns,
    score_verdicts,
)
from judgefuse.evaluation.table_eval import judge_order
from judgefuse.evaluation.vote_table import VoteTable
from judgefuse.fusion import cross_fit_predict, get_method, requires_fit
from judgefuse.fusion.cascade import Cascade, CascadeStage
from judgefuse.fusion.cascade_tuning import CascadeReport, tune_cascade
from judgefuse.fusion.columnar import COLUMNAR_METHODS, VoteColumns, fuse_columns
from judgefuse.fusion.columnar_crossfit import columnar_learned, cross_fit_columns
from judgefuse.judges.types import JudgedItem, Letter

DEFAULT_METHOD = "majority"


class TuneError(InputError, ValueError):
    """A tune request that cannot be served (no labels, unknown judge, ...)."""


@dataclass(frozen=True)
class TuneResult:
    """What ``tune`` computed: the scored row it tuned on and the threshold report."""

    source: str  # "method" or "judge"
    name: str
    row: ScoredRow
    report: ThresholdReport

    def as_dict(self, sources: Sequence[str] = ()) -> dict[str, Any]:
        return {
            "sources": list(sources),
            "kind": self.source,
            "name": self.name,
            "n_invalid": self.row.n_invalid,
            **self.report.as_dict(),
        }


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register ``tune`` on the top-level parser."""
    tune = subcommands.add_parser(
        "tune",
        help="auto-accept threshold with a precision guarantee, from labelled judgments",
        description="Pick the smallest confidence threshold whose auto-accepted verdicts have "
        "precision >= TARGET with probability >= 1 - DELTA (one-sided Clopper-Pearson bound, "
        "fixed-sequence testing from high to low thresholds); report coverage, expected errors "
        "and the review load.",
    )
    add_source_arguments(tune)
    tune.add_argument(
        "--target", type=float_in(0.0, 1.0), default=0.9, help="target precision of auto-accepted verdicts (default 0.9)"
    )
    tune.add_argument(
        "--delta", type=float_in(0.0, 1.0), default=0.1, help="allowed failure probability of the guarantee (default 0.1)"
    )
    tune.add_argument(
        "--min-count", type=int_at_least(1), default=30,
        help="skip thresholds accepting fewer labelled items than this (default 30)",
    )
    who = tune.add_mutually_exclusive_group()
    who.add_argument("--method", metavar="NAME", help=f"fusion method to tune (default {DEFAULT_METHOD}; learned ones are cross-fitted)")
    who.add_argument("--judge", metavar="NAME", help="tune a single judge's confidence instead of a fusion method")
    who.add_argument(
        "--cascade", metavar="J1,J2,...",
        help="tune a cascade: stages cheapest first, comma-separated (a stage of several judges: "
        "'a+b', fused by majority); each stage's threshold is tuned on the items that reach it",
    )
    tune.add_argument(
        "--fallback", choices=("review", "panel"), default="review",
        help="cascade: after the last stage, human review (default) or the full panel (majority of every judge, tuned too)",
    )
    tune.add_argument(
        "--delta-split", choices=("bonferroni", "per_stage"), default="bonferroni",
        help="cascade: delta / stages (default: a 1 - delta guarantee for the whole cascade) or "
        "per_stage (delta per stage: more coverage, but the whole cascade is NOT guaranteed at 1 - delta)",
    )
    tune.add_argument(
        "--folds", type=int_at_least(2), default=5, help="cross-fitting folds for learned methods (default 5)"
    )
    tune.add_argument("--seed", type=int, default=0, help="seed of the cross-fitting folds (default 0)")
    tune.add_argument("--json", dest="json_out", type=output_path, help="write the report as JSON here")
    tune.set_defaults(handler=run_tune)


def scored_row(
    items: Sequence[JudgedItem],
    *,
    method: str | None = None,
    judge: str | None = None,
    n_folds: int = 5,
    seed: int = 0,
) -> tuple[str, str, ScoredRow]:
    """``(kind, name, row)``: the labelled items scored for one judge or one fusion method."""
    if method is not None and judge is not None:
        raise TuneError("give a fusion method or a judge, not both")
    labelled = [judged for judged in items if judged.item.label is not None]
    if not labelled:
        raise TuneError("no labelled items: tuning needs items with a label (A or B)")
    if judge is not None:
        known = judge_names(labelled)
        if judge not in known:
            raise TuneError(f"unknown judge {judge!r}; judges in the data: {', '.join(known)}")
        return "judge", judge, score_judge_columns(judge, labelled, VoteColumns.from_batches(
            [judged.votes for judged in labelled]))
    name = method or DEFAULT_METHOD
    fusion = get_method(name)  # an unknown name fails here, listing the known ones
    batches = [judged.votes for judged in labelled]
    if name in COLUMNAR_METHODS or columnar_learned(fusion):
        # a voting rule, a recalibrated one or stacking: over arrays (judgefuse.fusion.columnar,
        # .columnar_stacking), the per-item path's row, cross-fitted on the same folds
        columns = VoteColumns.from_batches(batches)
        if name in COLUMNAR_METHODS:
            fused = fuse_columns(name, columns)
        else:
            letters: list[Letter] = [judged.item.label for judged in labelled]  # type: ignore[misc]
            fused = cross_fit_columns(name, columns, letters, n_folds=n_folds, seed=seed)
        return "method", name, score_columns(name, labelled, fused, columns)
    if requires_fit(fusion):
        labels = [judged.item.label for judged in labelled]
        verdicts = cross_fit_predict(lambda: get_method(name), batches, labels, n_folds=n_folds, seed=seed)  # type: ignore[arg-type]
    else:
        verdicts = [fusion(votes) for votes in batches]
    return "method", name, score_verdicts(name, labelled, verdicts)


def columnar_tune(method: str | None, judge: str | None) -> bool:
    """Whether ``tune`` scores over arrays (:func:`scored_row_table`): a judge, a voting rule, a
    recalibrated one, ``stacked`` or ``offset_stacked``."""
    if judge is not None:
        return method is None
    name = method or DEFAULT_METHOD
    return name in COLUMNAR_METHODS or columnar_learned(get_method(name))


def scored_row_table(
    table: VoteTable, *, method: str | None = None, judge: str | None = None, n_folds: int = 5, seed: int = 0
) -> tuple[str, str, ScoredRow]:
    """:func:`scored_row` of a votes file read into arrays (no object per item), for the
    judges and methods :func:`columnar_tune` names: the same row."""
    labelled = table.take(np.flatnonzero(table.items.decided))
    if not labelled.n_items:
        raise TuneError("no labelled items: tuning needs items with a label (A or B)")
    if judge is not None:
        known = judge_order(labelled.votes)
        if judge not in known:
            raise TuneError(f"unknown judge {judge!r}; judges in the data: {', '.join(known)}")
        return "judge", judge, score_judge_columns(judge, labelled.items, labelled.votes)
    name = method or DEFAULT_METHOD
    if name in COLUMNAR_METHODS:
        fused = fuse_columns(name, labelled.votes)
    else:
        fused = cross_fit_columns(name, labelled.votes, labelled.items.label_a, n_folds=n_folds, seed=seed)
    return "method", name, score_columns(name, labelled.items, fused, labelled.votes)


def tune_items(
    items: Sequence[JudgedItem] | VoteTable,
    *,
    target: float = 0.9,
    delta: float = 0.1,
    min_count: int = 30,
    method: str | None = None,
    judge: str | None = None,
    n_folds: int = 5,
    seed: int = 0,
) -> TuneResult:
    """Score one judge or method on the labelled ``items`` (judged items, or a table of them for
    the judges and methods :func:`columnar_tune` names) and tune its threshold."""
    if isinstance(items, VoteTable):
        kind, name, row = scored_row_table(items, method=method, judge=judge, n_folds=n_folds, seed=seed)
    else:
        kind, name, row = scored_row(items, method=method, judge=judge, n_folds=n_folds, seed=seed)
    if row.confidence.size == 0:
        raise TuneError(f"{kind} {name!r} has no scored labelled items")
    report = tune_threshold(
        row.confidence, row.correct, target_precision=target, delta=delta, min_count=min_count
    )
    return TuneResult(kind, name, row, report)


def report_table(result: TuneResult, *, title: str) -> Table:
    """The operator's view of one tuning result."""
    rep = result.report
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("", style="bold")
    table.add_column("")
    table.add_row(result.source, result.name)
    table.add_row("labelled items", f"{rep.n:,} ({result.row.n_invalid} without a usable answer, scored wrong at 0.5)")
    table.add_row(
        "guarantee",
        f"precision >= {rep.target:g} with probability >= {1 - rep.delta:g} "
        f"(Clopper-Pearson, fixed-sequence; min {rep.min_count} accepted)",
    )
    if rep.threshold is None:
        table.add_row("threshold", "[bold red]none: no threshold qualifies, everything goes to review[/]")
        why = rep.reason.removeprefix("no threshold qualifies: route everything to review (")
        table.add_row("why", why.removesuffix(")") if why != rep.reason else why)
        table.add_row("review load", "100%")
        return table
    table.add_row("threshold", f"[bold green]auto-accept when confidence >= {rep.threshold:.6g}[/]")
    table.add_row("coverage", f"{100 * rep.coverage:.1f}% auto-accepted ({rep.n_accepted:,} of {rep.n:,})")
    table.add_row(
        "precision",
        f"{100 * rep.precision:.2f}% observed; {100 * (1 - rep.delta):g}% lower bound "
        f"{100 * rep.lower_bound:.2f}% (margin {100 * rep.margin:+.2f} points over the target"
        + ("; thin: certificates within 1 point missed more often in simulation" if rep.margin < 0.01 else "")
        + ")",
    )
    table.add_row(
        "expected errors",
        f"{rep.expected_errors:g} among the {rep.n_accepted:,} accepted "
        f"({rep.expected_errors / rep.n:.2%} of all traffic)",
    )
    table.add_row("review load", f"{100 * rep.review_load:.1f}% sent to human review ({rep.n - rep.n_accepted:,} items)")
    table.add_row("scan", f"{len(rep.path)} thresholds tested ({rep.n_skipped} skipped: fewer than {rep.min_count} accepted); {rep.reason}")
    return table


def parse_cascade(spec: str, items: Sequence[JudgedItem], *, fallback: str = "review") -> Cascade:
    """``"a,b,c+d"`` -> a :class:`Cascade` over the judges in ``items`` (unknown names refused)."""
    known = judge_names(items)
    stages = []
    for part in spec.split(","):
        names = tuple(name.strip() for name in part.split("+") if name.strip())
        if not names:
            raise TuneError(f"empty cascade stage in {spec!r}")
        unknown = [name for name in names if name not in known]
        if unknown:
            raise TuneError(f"unknown judge(s) {', '.join(unknown)} in --cascade; judges in the data: {', '.join(known)}")
        stages.append(CascadeStage(names))
    try:
        return Cascade(tuple(stages), fallback=fallback, panel_judges=tuple(known))  # type: ignore[arg-type]
    except ValueError as exc:
        raise TuneError(str(exc)) from None


def tune_cascade_items(
    items: Sequence[JudgedItem],
    spec: str,
    *,
    target: float = 0.9,
    delta: float = 0.1,
    min_count: int = 30,
    fallback: str = "review",
    delta_split: str = "bonferroni",
) -> CascadeReport:
    """Parse ``spec`` and tune the cascade on the labelled ``items``."""
    labelled = [judged for judged in items if judged.item.label is not None]
    if not labelled:
        raise TuneError("no labelled items: tuning needs items with a label (A or B)")
    cascade = parse_cascade(spec, labelled, fallback=fallback)
    return tune_cascade(
        labelled, cascade, target_precision=target, delta=delta, min_count=min_count,
        delta_split=delta_split,  # type: ignore[arg-type]
    )  # fmt: skip


def cascade_table(report: CascadeReport, *, title: str, name_limit: int = 40) -> Table:
    """Per-stage thresholds and the cascade's coverage and calls per item.

    Judge names are shortened to ``name_limit`` (uniquely, see :func:`short_names`); the judges
    column folds rather than cuts, so no name is ever lost to the width.
    """
    names = short_names(report.cascade.judges, name_limit)
    table = compact_table(title)
    for header in ("stage", "judges", "reached", "accept", "threshold", "precision", "bound"):
        left = header in ("stage", "judges")
        table.add_column(header, justify="left" if left else "right", overflow="fold", no_wrap=header != "judges")
    for index, stage in enumerate(report.stages, start=1):
        rep = stage.report
        if stage.threshold is None or rep is None:
            threshold = "[red]none[/]"
            precision = lower = "-"
        else:
            threshold = f"{stage.threshold:.6g}"
            precision = f"{100 * rep.precision:.2f}%"
            lower = f"{100 * rep.lower_bound:.2f}%"
        judges = "\n+".join(names.get(judge, judge) for judge in stage.judges)  # one judge a line
        table.add_row(
            str(index), judges if stage.name != "panel" else f"panel ({judges})",
            str(stage.n_reached), str(stage.n_accepted), threshold, precision, lower,
        )  # fmt: skip
    ev = report.calibration
    n_judges = len(report.cascade.judges)
    accepted = "-" if math.isnan(ev.accuracy_accepted) else f"{100 * ev.accuracy_accepted:.2f}%"
    table.caption = (
        f"guarantee: {report.guarantee} (Clopper-Pearson, fixed-sequence, min {report.min_count}); "
        f"coverage {100 * ev.coverage:.1f}% ({round(ev.coverage * ev.n)} of {ev.n} auto-accepted), "
        f"precision of accepted {accepted}, ECE {100 * ev.ece:.2f}%, "
        f"calls/item {ev.calls_per_item:.3f} (full panel: {n_judges}); fallback: {report.cascade.fallback}; "
        "threshold none: no threshold qualifies, the stage escalates every item; bound: the "
        "1 - delta lower confidence bound on precision"
    )
    table.caption_justify = "left"
    return table


def run_tune(args: argparse.Namespace) -> int:
    cascade = getattr(args, "cascade", None)
    source: Sequence[JudgedItem] | VoteTable
    if not cascade and _columnar(args):
        source, _ = load_table_sources(args)
    else:
        source, _ = load_sources(args)
    if cascade:
        assert not isinstance(source, VoteTable)
        with one_blas_thread():
            return _run_tune_cascade(args, source)
    with one_blas_thread():
        result = tune_items(
            source,
            target=args.target,
            delta=args.delta,
            min_count=args.min_count,
            method=args.method,
            judge=args.judge,
            n_folds=args.folds,
            seed=args.seed,
        )
    sources = [str(path) for path in args.paths]
    console = output_console()
    title = f"judgefuse tune: {', '.join(Path(s).name for s in sources)}"
    console.print(report_table(result, title=title))
    if args.json_out:
        text = json.dumps(result.as_dict(sources), indent=2, allow_nan=False) + "\n"
        console.print(f"wrote {write_atomic(args.json_out, text)}")
    return 0


def _columnar(args: argparse.Namespace) -> bool:
    """Whether ``tune`` reads the data into arrays (a fault in the arguments: the items' path says it)."""
    try:
        return columnar_tune(args.method, args.judge)
    except (InputError, ValueError, KeyError):
        return False


def _run_tune_cascade(args: argparse.Namespace, items: Sequence[JudgedItem]) -> int:
    report = tune_cascade_items(
        items, args.cascade, target=args.target, delta=args.delta, min_count=args.min_count,
        fallback=args.fallback, delta_split=args.delta_split,
    )  # fmt: skip
    sources = [str(path) for path in args.paths]
    console = output_console()
    title = f"judgefuse tune --cascade: {', '.join(Path(s).name for s in sources)}"
    table, limit = fit(console, (40, 24, 16, 12), lambda lim: cascade_table(report, title=title, name_limit=lim))
    console.print(table)
    for entry in legend(short_names(report.cascade.judges, limit)):
        console.print(f"  {entry}", highlight=False, overflow="fold")
    if args.json_out:
        data = {"sources": sources, "kind": "cascade", "name": args.cascade, **report.as_dict()}
        text = json.dumps(data, indent=2, allow_nan=False) + "\n"
        console.print(f"wrote {write_atomic(args.json_out, text)}")
    return 0
