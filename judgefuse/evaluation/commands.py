"""``judgefuse eval`` and ``judgefuse compare``: the offline evaluation from the shell."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from judgefuse.errors import InputError
from judgefuse.evaluation import fuser_eval_command
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
from judgefuse.evaluation.compare_outputs import compare_html, compare_json, print_compare_report
from judgefuse.evaluation.display import output_console
from judgefuse.evaluation.html_report import render_html
from judgefuse.evaluation.json_report import to_json
from judgefuse.evaluation.loaders import UndefinedAnswers
from judgefuse.evaluation.panel_structure import (
    PanelStructure,
    panel_structure,
    panel_structure_of_table,
    print_panel_structure,
)
from judgefuse.evaluation.progress import progress_bar
from judgefuse.evaluation.runner import Evaluation, EvaluationOptions, default_methods, evaluate
from judgefuse.evaluation.scoring import judge_names
from judgefuse.evaluation.table import print_evaluation
from judgefuse.evaluation.table_compare import ANSWER_MODEL_FIELDS, compare_table
from judgefuse.evaluation.table_eval import columnar_methods, evaluate_table
from judgefuse.evaluation.vote_table import LABEL_BOTH_BAD, LABEL_TIE, VoteTable
from judgefuse.fusion import get_method


def add_commands(subcommands: argparse._SubParsersAction) -> None:
    """Register ``eval`` and ``compare`` on the top-level parser."""
    ev = subcommands.add_parser(
        "eval",
        help="evaluate every judge and fusion method on labelled recorded judgments",
        description="Score judges and fusion methods (learned ones cross-fitted) with every calibration "
        "metric; print the paper-shaped tables; optionally write JSON and an HTML report.",
    )
    add_source_arguments(ev)
    ev.add_argument("--json", dest="json_out", type=output_path, help="write the machine-readable report here")
    ev.add_argument(
        "--html", dest="html_out", type=output_path, help="write the HTML report (reliability diagrams) here"
    )
    ev.add_argument(
        "--methods",
        nargs="+",
        metavar="NAME",
        help="fusion methods to run, 'base+recalibrator' allowed (e.g. majority+isotonic); "
        f"default: {', '.join(default_methods())}",
    )
    ev.add_argument(
        "--folds", type=int_at_least(2), default=5, help="cross-fitting folds for learned methods (default 5)"
    )
    ev.add_argument("--bootstrap", type=int_at_least(1), default=1000, help="bootstrap resamples for CIs (default 1000)")
    ev.add_argument("--bins", type=int_at_least(1), default=10, help="equal-width bins for ECE/MCE (default 10)")
    ev.add_argument(
        "--eps", type=float_in(0.0, 0.5, low_open=False), default=0.1, help="TH-Score interval width (default 0.1)"
    )
    ev.add_argument("--seed", type=int, default=0, help="seed of the cross-fitting folds and the bootstrap (default 0)")
    ev.add_argument(
        "--fuser",
        metavar="PANEL_OR_MODEL",
        help="add the LLM fuser's row: a panel file with a 'fuser:' entry, or a litellm model string "
        "(with --fuser-api-base for an OpenAI-compatible server); it reads each item's recorded critiques",
    )
    ev.add_argument("--fuser-api-base", metavar="URL", help="the fuser model's api_base (with a model string)")
    ev.add_argument(
        "--fuser-votes",
        type=Path,
        metavar="PATH",
        help="the fuser's recorded answers: read, and appended to as items finish, so a rerun never asks "
        "the model twice (default: DATA.fuser-votes.jsonl in the current folder)",
    )
    ev.add_argument(
        "--fuser-concurrency", type=int_at_least(1), default=4, help="fuser calls in flight at once (default 4)"
    )
    ev.add_argument("--limit", type=int_at_least(1), help="evaluate only the first N items of the data")
    ev.add_argument("--quiet", action="store_true", help="no tables on the terminal")
    ev.add_argument(
        "--wide",
        action="store_true",
        help="one table with every metric and full judge names (does not fit 80 columns)",
    )
    ev.set_defaults(handler=run_eval)

    cmp = subcommands.add_parser(
        "compare",
        help="accuracy-controlled calibration comparison of two judges",
        description="Compare the calibration (ECE, Brier) of two judges on the items both judged: raw, "
        "instance-aligned (items both got right or both got wrong), distribution-aligned (the more "
        "accurate judge reweighted to the other's accuracy) and candidate-aligned (both answers of each item "
        "scored as candidates). Each difference comes with a paired bootstrap interval; a ranking reversal "
        "is reported, naming metric and view, only where the raw difference's interval excludes 0 and an "
        "aligned view flips the order. Then every judge on the items all judges voted on, and the "
        "self-preference of judges whose model family wrote one of an item's answers.",
    )
    add_source_arguments(cmp)
    cmp.add_argument(
        "--judges", nargs=2, required=True, metavar=("JUDGE_1", "JUDGE_2"), help="the two judges, as named in the data"
    )
    cmp.add_argument("--bins", type=int_at_least(1), default=10, help="equal-width bins for ECE (default 10)")
    cmp.add_argument(
        "--bootstrap", type=int_at_least(1), default=1000, help="bootstrap resamples for the intervals (default 1000)"
    )
    cmp.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (default 0)")
    cmp.add_argument("--json", dest="json_out", type=output_path, help="write the machine-readable report here")
    cmp.add_argument("--html", dest="html_out", type=output_path, help="write the HTML report here")
    cmp.set_defaults(handler=run_compare)


def run_eval(args: argparse.Namespace) -> int:
    console = output_console()
    started = time.perf_counter()
    if _columnar(args):
        return _run_eval_table(args, console, started)
    items, answers = load_sources(args)
    if args.limit is not None:
        items = items[: args.limit]
    loaded = time.perf_counter()
    methods = fuser_eval_command.voting_methods(args)
    for name in methods or ():
        get_method(name)  # an unknown name fails here, before any work, listing the known ones
    fused, fuser_failed = fuser_eval_command.fuser_rows(args, items)
    options = EvaluationOptions(
        methods=methods,
        n_bins=args.bins,
        eps=args.eps,
        n_folds=args.folds,
        n_bootstrap=args.bootstrap,
        seed=args.seed,
    )
    n_rows = len(judge_names(items)) + len(options.methods or default_methods()) + len(fused)
    with progress_bar("evaluating {task.description}", quiet=args.quiet) as progress:
        task = progress.add_task("", total=n_rows)

        def step(name: str) -> None:
            progress.update(task, advance=1, description=name)

        evaluation = evaluate(items, options=options, progress=step, fused=fused)
    _write_reports(
        args, console, evaluation, answers,
        lambda: panel_structure([judged for judged in items if judged.item.label is not None]),
    )  # fmt: skip
    undecided = sum(1 for judged in items if judged.item.tie_label is not None)
    labelled = f"{evaluation.n_labelled} labelled" + (f" A/B (+{undecided} tie/both_bad)" if undecided else "")
    console.print(
        f"{len(items)} items, {labelled}, {len(evaluation.rows)} rows; "
        f"load {loaded - started:.2f} s, total {time.perf_counter() - started:.2f} s"
    )
    if fuser_failed:  # the other rows are reported; the run still fails, so no script takes it as whole
        console.print(f"[red]{fuser_failed} fuser calls failed: no fuser row (run again to retry them)[/red]")
        return 1
    return 0


def _write_reports(
    args: argparse.Namespace,
    console: Console,
    evaluation: Evaluation,
    answers: UndefinedAnswers,
    structure: Callable[[], PanelStructure | None],
) -> None:
    """The tables and the panel structure (unless ``--quiet``), then ``--json`` and ``--html``."""
    sources = [str(path) for path in args.paths]
    title = f"judgefuse eval: {', '.join(Path(s).name for s in sources)}"
    if not args.quiet:
        print_evaluation(
            evaluation, title=title, console=console, wide=args.wide, undefined_answers=answers.per_judge()
        )
        found = structure()
        if found is not None:
            print_panel_structure(found, console)
    if args.json_out:
        console.print(f"wrote {write_atomic(args.json_out, to_json(evaluation, sources=sources, undefined_answers=answers.per_judge()))}")
    if args.html_out:
        html = render_html(evaluation, title=title, sources=sources)
        console.print(f"wrote {write_atomic(args.html_out, html)}")


def _columnar(args: argparse.Namespace) -> bool:
    """Whether ``eval`` reads the data into arrays (:mod:`.table_eval`): every method asked for
    has a columnar form and there is no fuser row (anything else, faults included, takes the
    judged items' path, which reports them in its own order)."""
    if args.fuser or args.fuser_api_base:
        return False
    try:
        return columnar_methods(fuser_eval_command.voting_methods(args))
    except (InputError, ValueError, KeyError):
        return False


def _run_eval_table(args: argparse.Namespace, console: Console, started: float) -> int:
    """``eval`` over a votes file streamed into arrays: no object per item. The table
    is made inside ``evaluate_table`` (:class:`_TableSource`), which keeps only its labelled items."""
    options = EvaluationOptions(
        methods=fuser_eval_command.voting_methods(args),
        n_bins=args.bins,
        eps=args.eps,
        n_folds=args.folds,
        n_bootstrap=args.bootstrap,
        seed=args.seed,
    )
    with progress_bar("evaluating {task.description}", quiet=args.quiet) as progress:
        task = progress.add_task("", total=None)
        found = _TableSource(args, lambda n_judges: progress.update(
            task, total=n_judges + len(options.methods or default_methods())))

        def step(name: str) -> None:
            progress.update(task, advance=1, description=name)

        with one_blas_thread():
            evaluation = evaluate_table(found.load, options=options, progress=step, jobs=args.jobs)
    _write_reports(args, console, evaluation, found.answers, lambda: found.structure)
    undecided = found.n_undecided
    labelled = f"{evaluation.n_labelled} labelled" + (f" A/B (+{undecided} tie/both_bad)" if undecided else "")
    console.print(
        f"{evaluation.n_items} items, {labelled}, {len(evaluation.rows)} rows; "
        f"load {found.loaded - started:.2f} s, total {time.perf_counter() - started:.2f} s"
    )
    return 0


class _TableSource:
    """Loads the table for ``evaluate_table`` and keeps what the report needs of it afterwards:
    the undefined answers, the time it was loaded, the tie-labelled count and (unless ``--quiet``)
    the panel structure, computed before the whole table is let go."""

    def __init__(self, args: argparse.Namespace, on_judges: Callable[[int], None]) -> None:
        self.args = args
        self.on_judges = on_judges
        self.answers = UndefinedAnswers()
        self.loaded = time.perf_counter()
        self.n_undecided = 0
        self.structure: PanelStructure | None = None

    def load(self) -> VoteTable:
        table, self.answers = load_table_sources(self.args)
        if self.args.limit is not None:
            table = table.head(self.args.limit)
        self.loaded = time.perf_counter()
        outcome = table.items.outcome
        self.n_undecided = int(((outcome == LABEL_TIE) | (outcome == LABEL_BOTH_BAD)).sum())
        self.on_judges(len(table.votes.judges))
        if not self.args.quiet:
            self.structure = panel_structure_of_table(table)
        return table


def run_compare(args: argparse.Namespace) -> int:
    """``compare`` over the data read into arrays (:mod:`.table_compare`; a votes file streamed, no
    object per item): the report of :func:`~.comparison.compare_report` over judged items, the reference."""
    table, _ = load_table_sources(args, metadata=ANSWER_MODEL_FIELDS)
    with one_blas_thread():
        report = compare_table(
            table, args.judges[0], args.judges[1], n_bins=args.bins, n_resamples=args.bootstrap, seed=args.seed
        )
    del table
    console = output_console()
    print_compare_report(report, console=console)
    sources = [str(path) for path in args.paths]
    if args.json_out:
        console.print(f"wrote {write_atomic(args.json_out, compare_json(report, sources=sources))}")
    if args.html_out:
        console.print(f"wrote {write_atomic(args.html_out, compare_html(report, sources=sources))}")
    return 0
