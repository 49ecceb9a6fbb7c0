"""Terminal tables shaped like seed 002's Tables 1 and 4 (rows: judges, then methods).

Units follow the paper: accuracy, ECE, adaptive CE, MCE and MacroCE in percent; Brier, NLL and
AUROC as fractions; TH-Score in its own units. The JSON report keeps fractions throughout.
The main table ends with the cost of each row: model calls per item and the total cost in USD
(summed over the votes behind each scored item; a fusion row counts every vote it fused).
"""

from __future__ import annotations

import math

from rich.console import Console
from rich.table import Table

from judgefuse.evaluation.runner import Evaluation, RowReport
from judgefuse.evaluation.scoring import ScoredRow

PERCENT = {"accuracy", "ece", "adaptive_ce", "mce", "macroce"}
COLUMNS = (
    ("accuracy", "Acc %"),
    ("ece", "ECE %"),
    ("adaptive_ce", "AdaptCE %"),
    ("mce", "MCE %"),
    ("brier", "Brier"),
    ("nll", "NLL"),
    ("th_score", "TH"),
    ("macroce", "MacroCE %"),
    ("auroc", "AUROC"),
)


def fmt(metric: str, value: float) -> str:
    """A metric in the paper's units, or '-' when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if metric in PERCENT:
        return f"{100 * value:.2f}"
    return f"{value:.2f}" if metric == "th_score" else f"{value:.3f}"


def _with_ci(report: RowReport, metric: str) -> str:
    low, high = report.ci.get(metric, (math.nan, math.nan))
    return f"{fmt(metric, report.metrics[metric])} [{fmt(metric, low)}, {fmt(metric, high)}]"


def main_table(evaluation: Evaluation, *, title: str) -> Table:
    """Every row over all labelled items, with bootstrap 95% CIs for accuracy and ECE."""
    table = Table(title=title, title_justify="left")
    table.add_column("judge / method")
    table.add_column("kind")
    table.add_column("n", justify="right")
    table.add_column("invalid", justify="right")
    for _metric, header in COLUMNS:
        table.add_column(header, justify="right")
    for header in COST_COLUMNS:
        table.add_column(header, justify="right")
    for report in evaluation.rows:
        cells = [
            _with_ci(report, metric) if metric in report.ci else fmt(metric, report.metrics[metric])
            for metric, _header in COLUMNS
        ]
        row = report.row
        table.add_row(row.name, row.kind, str(row.correct.size), str(row.n_invalid), *cells, *cost_cells(row))
    return table


COST_COLUMNS = ("calls/item", "cost $")


def cost_cells(row: ScoredRow) -> tuple[str, str]:
    """Model calls per scored item and the total cost in USD (recorded votes carry neither: 0)."""
    n = row.correct.size
    calls = f"{row.calls / n:.2f}" if n else "-"
    return calls, f"{row.cost_usd:.4f}"


def category_table(evaluation: Evaluation, category: str) -> Table:
    """Accuracy, ECE, Brier and TH of every row on one category."""
    table = Table(title=f"category: {category}", title_justify="left")
    for header in ("judge / method", "n", "Acc %", "ECE %", "Brier", "TH"):
        table.add_column(header, justify="left" if header == "judge / method" else "right")
    for report in evaluation.rows:
        metrics = report.per_category.get(category)
        if metrics is None:
            continue
        table.add_row(
            report.row.name,
            str(int(metrics["n"])),
            *(fmt(metric, metrics[metric]) for metric in ("accuracy", "ece", "brier", "th_score")),
        )
    return table


def helped_table(evaluation: Evaluation) -> Table:
    """Seed 002 Figure 5: items each method got right (helped) or wrong (harmed) vs majority."""
    table = Table(title="against majority voting", title_justify="left")
    for header in ("method", "helped", "harmed", "net"):
        table.add_column(header, justify="left" if header == "method" else "right")
    for report in evaluation.rows:
        counts = report.helped_harmed
        if counts is None:
            continue
        table.add_row(
            report.row.name, str(counts.helped), str(counts.harmed), f"{counts.helped - counts.harmed:+d}"
        )
    return table


def print_evaluation(evaluation: Evaluation, *, title: str, console: Console | None = None) -> None:
    """Print the main table, one table per category, helped/harmed and skipped methods."""
    console = console or Console()
    console.print(main_table(evaluation, title=title))
    for category in evaluation.categories:
        console.print(category_table(evaluation, category))
    if any(report.helped_harmed is not None for report in evaluation.rows):
        console.print(helped_table(evaluation))
    for name, reason in evaluation.skipped_methods.items():
        console.print(f"[yellow]skipped {name}[/yellow]: {reason}")
