"""Terminal tables shaped like Tables 1 and 4 of "Overconfidence in LLM-as-a-Judge" (rows: judges, then methods), made to fit.

Units follow the paper: accuracy, ECE, adaptive CE, MCE and MacroCE in percent; Brier, NLL and
AUROC as fractions; TH-Score in its own units. The JSON report keeps fractions throughout.

By default the output fits the console (80 columns and up, see :mod:`.display`): a compact main
table (accuracy and ECE with their 95% intervals, Brier, TH, AUROC), then the other metrics and
the cost (calls per item, total cost) in a second table, one table per category and helped/harmed
counts; long judge names are shortened, uniquely, with a legend. ``wide=True`` prints the single
full table instead (every metric, full names), for files and wide screens.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from judgefuse.calibration.builtin_metrics import BUILTIN_METRICS
from judgefuse.calibration.metric_registry import UnknownMetric, get_metric, registered_metrics
from judgefuse.evaluation.display import compact_table, fit, legend, natural_width, short_names
from judgefuse.evaluation.runner import CI_METHOD, Evaluation, RowReport
from judgefuse.evaluation.scoring import TIE_RULE, ScoredRow
from judgefuse.evaluation.ties import TieReport
from judgefuse.fusion.capabilities import known_capabilities

Column = tuple[str, str]
"""(metric name, header)."""


def columns() -> tuple[Column, ...]:
    """The wide table's metric columns: every registered metric shown in a table, in order."""
    return tuple((m.name, m.header()) for m in registered_metrics() if m.table != "json")


def main_columns() -> tuple[Column, ...]:
    """The compact main table's plain columns (accuracy and ECE come first, with intervals)."""
    return tuple((m.name, m.header(compact=True)) for m in registered_metrics()
                 if m.table == "main" and m.name not in CI_COLUMNS)


def more_columns() -> tuple[Column, ...]:
    """The second table's metric columns."""
    return tuple((m.name, m.header(compact=True)) for m in registered_metrics() if m.table == "more")


CI_COLUMNS = ("accuracy", "ece")
"""The main table's first two metric columns, each with its interval."""
PERCENT = frozenset(m.name for m in BUILTIN_METRICS if m.percent)
COLUMNS = tuple((m.name, m.header()) for m in BUILTIN_METRICS if m.table != "json")
"""The built-in metrics' wide columns (:func:`columns` adds plugins')."""
MAIN_COLUMNS = tuple((m.name, m.header(compact=True)) for m in BUILTIN_METRICS
                     if m.table == "main" and m.name not in CI_COLUMNS)
MORE_COLUMNS = tuple((m.name, m.header(compact=True)) for m in BUILTIN_METRICS if m.table == "more")
MORE_COST_COLUMNS = ("calls/item", "$ total")
COST_COLUMNS = ("calls/item", "cost $ total")
NAME_HEADER = "judge / method"
CI_CAPTION = f"[..]: 95% bootstrap interval ({CI_METHOD}; it always contains the estimate)"


def fmt(metric: str, value: float | None) -> str:
    """A metric in its declared display units (the paper's for the built-ins), or '-' when undefined."""
    try:
        return get_metric(metric).format(value)
    except UnknownMetric:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return f"{value:.3f}"


TIES_CAPTION = (
    "accuracy and calibration above: on decided (A/B) labels only. labels A/B, tie, bad (both_bad): counts; "
    "JB %: JudgeBench's rule (a tie answer scores 0); dec %: A/B answers on A/B labels; "
    "3-way %: answer = label over A/B/tie labels (both_bad left out); ties: tie answers; tie %: of all items; "
    "tie ok %: tie answers whose label is a tie (over A/B/tie labels; tie labels answered tie: JSON and HTML)"
)


def ties_table(ties: Sequence[TieReport], names: Mapping[str, str]) -> Table:
    """How ties count, per row (:mod:`.ties`): label and answer tie counts beside the tie-aware rates
    (``eval``'s rows, ``compare``'s judges)."""
    table = compact_table("ties")
    for header in (NAME_HEADER, "A/B", "tie", "bad", "JB %", "dec %", "3-way %", "ties", "tie %", "tie ok %"):
        table.add_column(header, justify="left" if header == NAME_HEADER else "right", no_wrap=True)

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.1f}"

    for t in ties:
        table.add_row(
            names.get(t.name, t.name), str(t.n_decided_labels), str(t.n_tie_labels), str(t.n_both_bad_labels),
            pct(t.judgebench_accuracy), pct(t.decided_accuracy), pct(t.three_way_accuracy),
            str(t.n_tie_answers), pct(t.tie_rate), pct(t.tie_precision),
        )
    return table


def _interval(metric: str, low: float, high: float, digits: int) -> str:
    if math.isnan(low) or math.isnan(high):
        return "[-]"
    scale = 100.0 if get_metric(metric).percent else 1.0
    return f"[{scale * low:.{digits}f}, {scale * high:.{digits}f}]"


def _with_ci(report: RowReport, metric: str, *, inline: bool = True) -> str:
    low, high = report.ci.get(metric, (math.nan, math.nan))
    value = fmt(metric, report.metrics[metric])
    if inline:
        return f"{value} {_interval(metric, low, high, 2)}"
    return f"{value}\n{_interval(metric, low, high, 1)}"


def cost_cells(row: ScoredRow) -> tuple[str, str]:
    """Model calls per scored item and the total cost in USD (recorded votes carry neither: 0)."""
    n = row.correct.size
    calls = f"{row.calls / n:.2f}" if n else "-"
    return calls, f"{row.cost_usd:.4f}"


def wide_table(evaluation: Evaluation, *, title: str) -> Table:
    """Every metric of every row, full names, intervals inline: the ``--wide`` table."""
    table = Table(title=title, title_justify="left", caption=CI_CAPTION, caption_justify="left")
    table.add_column(NAME_HEADER, no_wrap=True)
    table.add_column("kind")
    table.add_column("n", justify="right")
    table.add_column("invalid", justify="right")
    wide_columns = columns()
    for _metric, header in wide_columns:
        table.add_column(header, justify="right", no_wrap=True)
    for header in COST_COLUMNS:
        table.add_column(header, justify="right")
    for report in evaluation.rows:
        cells = [
            _with_ci(report, metric) if metric in report.ci else fmt(metric, report.metrics[metric])
            for metric, _header in wide_columns
        ]
        row = report.row
        table.add_row(row.name, row.kind, str(row.correct.size), str(row.n_invalid), *cells, *cost_cells(row))
    return table


@dataclass(frozen=True)
class MainLayout:
    """How the compact main table is laid out: name length and intervals on the value's line or below."""

    name_limit: int
    inline_ci: bool


MAIN_LAYOUTS = tuple(
    MainLayout(limit, inline) for inline in (True, False) for limit in (40, 32, 26, 22, 18, 15, 12, 10)
)


def main_table(evaluation: Evaluation, *, title: str, layout: MainLayout = MAIN_LAYOUTS[0]) -> Table:
    """The headline metrics of every row; judges and methods in two sections."""
    names = short_names((report.row.name for report in evaluation.rows), layout.name_limit)
    sizes = {report.row.correct.size for report in evaluation.rows}
    same_n = len(sizes) == 1
    caption = f"n = {next(iter(sizes))} items on every row; {CI_CAPTION}" if same_n else CI_CAPTION
    table = compact_table(title, caption=caption + "; inv: invalid answers (scored wrong at 0.5)")
    table.add_column(NAME_HEADER, no_wrap=True)
    if not same_n:
        table.add_column("n", justify="right")
    table.add_column("inv", justify="right")
    for metric in CI_COLUMNS:
        table.add_column(get_metric(metric).header(), justify="right", no_wrap=True)
    plain = main_columns()
    for _metric, header in plain:
        table.add_column(header, justify="right", no_wrap=True)
    previous = None
    for report in evaluation.rows:
        row = report.row
        if previous is not None and previous != row.kind:
            table.add_section()
        previous = row.kind
        table.add_row(
            names[row.name],
            *(() if same_n else (str(row.correct.size),)),
            str(row.n_invalid),
            *(_with_ci(report, metric, inline=layout.inline_ci) for metric in CI_COLUMNS),
            *(fmt(metric, report.metrics[metric]) for metric, _header in plain),
        )
    return table


def more_table(evaluation: Evaluation, names: dict[str, str]) -> Table:
    """The metrics the main table leaves out, and the cost of each row."""
    table = compact_table("other metrics and cost", caption="$ total: the cost of all the row's calls, in USD")
    table.add_column(NAME_HEADER, no_wrap=True)
    more = more_columns()
    for _metric, header in more:
        table.add_column(header, justify="right", no_wrap=True)
    for header in MORE_COST_COLUMNS:
        table.add_column(header, justify="right", no_wrap=True)
    for report in evaluation.rows:
        table.add_row(
            names[report.row.name],
            *(fmt(metric, report.metrics[metric]) for metric, _header in more),
            *cost_cells(report.row),
        )
    return table


def category_table(evaluation: Evaluation, category: str, names: dict[str, str] | None = None) -> Table:
    """Accuracy, ECE, Brier and TH of every row on one category."""
    rows = [(report, report.per_category[category]) for report in evaluation.rows if category in report.per_category]
    sizes = {int(metrics["n"]) for _report, metrics in rows}
    same_n = len(sizes) == 1
    table = compact_table(f"category: {category}" + (f" (n = {next(iter(sizes))})" if same_n else ""))
    for header in (NAME_HEADER, *(() if same_n else ("n",)), "Acc %", "ECE %", "Brier", "TH"):
        table.add_column(header, justify="left" if header == NAME_HEADER else "right", no_wrap=True)
    for report, metrics in rows:
        table.add_row(
            (names or {}).get(report.row.name, report.row.name),
            *(() if same_n else (str(int(metrics["n"])),)),
            *(fmt(metric, metrics[metric]) for metric in ("accuracy", "ece", "brier", "th_score")),
        )
    return table


def helped_table(evaluation: Evaluation, names: dict[str, str] | None = None) -> Table:
    """"Overconfidence in LLM-as-a-Judge", Figure 5: items each method got right (helped) or wrong (harmed) vs majority."""
    table = compact_table("against majority voting")
    for header in ("method", "helped", "harmed", "net"):
        table.add_column(header, justify="left" if header == "method" else "right", no_wrap=True)
    for report in evaluation.rows:
        counts = report.helped_harmed
        if counts is None:
            continue
        table.add_row(
            (names or {}).get(report.row.name, report.row.name),
            str(counts.helped),
            str(counts.harmed),
            f"{counts.helped - counts.harmed:+d}",
        )
    return table


def agreement_table(evaluation: Evaluation, names: dict[str, str] | None = None) -> Table:
    """Cohen's kappa against the labels and the confusion counts (answer given per label)."""
    alpha = evaluation.judges_alpha
    table = compact_table(
        "agreement with the labels",
        caption="label A/B: how many items with that label each row answered A / B / tie / none; "
        f"judges' Krippendorff alpha (nominal) {'-' if alpha is None else f'{alpha:.3f}'}",
    )
    for header in (NAME_HEADER, "kappa", "label A", "label B"):
        table.add_column(header, justify="left" if header == NAME_HEADER else "right", no_wrap=True)
    for row in evaluation.agreement:
        table.add_row(
            (names or {}).get(row.name, row.name),
            "-" if row.kappa is None else f"{row.kappa:.3f}",
            *("/".join(str(n) for n in counts) for counts in row.confusion),
        )
    return table


def print_disagreements(evaluation: Evaluation, console: Console, names: dict[str, str], top: int = 2) -> None:
    """The fusion rows' most confident disagreements with the label (all rows: --json, --html)."""
    fusion = {report.row.name for report in evaluation.rows if report.row.kind == "fusion"}
    lines = [
        f"  {names.get(row.name, row.name)}: "
        + ", ".join(f"{d.item_id} ({d.answer} at {d.confidence:.2f}, label {d.label})" for d in row.disagreements[:top])
        for row in evaluation.agreement
        if row.name in fusion and row.disagreements
    ]
    if lines:
        console.print("most confident disagreements with the label:", highlight=False)
        for line in lines:
            console.print(line, highlight=False, overflow="fold", markup=False)


def _fit_main(evaluation: Evaluation, title: str, console: Console) -> tuple[Table, MainLayout]:
    """The most readable main-table layout whose names also let the second table fit, else any that fits."""
    rows = [report.row.name for report in evaluation.rows]
    for layout in MAIN_LAYOUTS:
        table = main_table(evaluation, title=title, layout=layout)
        more = more_table(evaluation, short_names(rows, layout.name_limit))
        if natural_width(console, table) <= console.width and natural_width(console, more) <= console.width:
            return table, layout
    return fit(console, MAIN_LAYOUTS, lambda lay: main_table(evaluation, title=title, layout=lay))


def _label_free(name: str) -> bool:
    """A registered method fused from the votes alone, no label and no item (a voting rule, dawid_skene)."""
    found = known_capabilities(name)
    return found is not None and not found.requires_fit and not found.reads_item


def print_evaluation(
    evaluation: Evaluation,
    *,
    title: str,
    console: Console | None = None,
    wide: bool = False,
    undefined_answers: Mapping[str, int] | None = None,
) -> None:
    """Print the report tables (see the module docstring for what ``wide`` changes).

    ``undefined_answers`` (judge -> answers its format does not define) is listed under the main
    table, since such an answer only makes the vote invalid when no other game decides it.
    """
    console = console or Console()
    if wide:
        table = wide_table(evaluation, title=title)
        width = max(console.width, natural_width(console, table))  # asked for: never squeezed
        Console(file=console.file, width=width, color_system="auto" if console.color_system else None).print(table)
        names = {report.row.name: report.row.name for report in evaluation.rows}
    else:
        table, layout = _fit_main(evaluation, title, console)
        console.print(table)
        names = short_names((report.row.name for report in evaluation.rows), layout.name_limit)
        shortened = legend(names)
        if shortened:
            console.print("names:", highlight=False)
            for entry in shortened:
                console.print(f"  {entry}", highlight=False, overflow="fold")
        more = more_table(evaluation, names)
        if natural_width(console, more) <= console.width:
            console.print(more)
        else:
            console.print("(other metrics and cost: --wide, or --json)", highlight=False)
    if undefined_answers:
        counted = ", ".join(f"{names.get(judge, judge)}: {n}" for judge, n in undefined_answers.items())
        console.print(f"undefined answers, read as no decision (inv counts the votes left invalid): {counted}",
                      highlight=False)
    tied = [(names.get(r.row.name, r.row.name), r.row.n_ties) for r in evaluation.rows if r.row.n_ties]
    if tied:
        counted = ", ".join(f"{name} {n}" for name, n in tied)
        console.print(f"tie answers (no answer preferred): {counted}; {TIE_RULE}",
                      highlight=False)
    if evaluation.has_ties:
        console.print(ties_table(evaluation.ties, names))
        console.print(TIES_CAPTION, highlight=False)
    for category in evaluation.categories:
        console.print(category_table(evaluation, category, names))
    if any(report.helped_harmed is not None for report in evaluation.rows):
        console.print(helped_table(evaluation, names))
    if evaluation.agreement:
        console.print(agreement_table(evaluation, names))
        print_disagreements(evaluation, console, names)
    label_free = [r.row.name for r in evaluation.rows if r.row.kind == "fusion" and _label_free(r.row.name)]
    for warning in evaluation.judge_warnings:
        weigh = f"; {', '.join(label_free)} weigh it like any other judge" if label_free else ""
        console.print(f"[yellow]warning[/yellow]: {warning.message}{weigh}", highlight=False)
    for name, reason in evaluation.skipped_methods.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
    for name, choices in evaluation.chosen.items():
        console.print(f"{name} chose (cross-validated log-loss on each fold's training labels): {choices}")
