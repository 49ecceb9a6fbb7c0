"""Tables of docs/results.md, printed from the shared data by the code that computes them, so a
test can compare the page with what the code gives (issue 47, item 5: the page had drifted).

    python benchmarks/results_tables.py judgebench|trust_or_escalate|cold_start [--data ../shared/data]

Prints a Markdown table the page shows under "Replayed judgments": the JudgeBench replay
(``judgefuse eval ../shared/data/judgebench``: 350 pairs, 10 judges, the 3 most accurate shown)
or the Trust-or-Escalate one (``judgefuse eval ../shared/data/trust_or_escalate``: 500
human-labelled pairs, three judges): the judges, then the rows the page keeps. The page's
highlighted row is bold, and so are its cells that are the best of their column. Or, for
``cold_start``, the grid under "Before labels": accuracy / ECE of the voting rules, Dawid-Skene
and stacking on JudgeBench, Trust-or-Escalate and the LLMBar decisions. Every number is from
:func:`judgefuse.evaluation.runner.evaluate` (the command's own rows) over the command's loader.
tests/evaluation/test_results_tables.py compares the output with the page line for line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import EvaluationOptions, RowReport, evaluate

__all__ = ["GRIDS", "TABLES", "Column", "Grid", "Table", "compute", "render", "render_grid"]

BOOTSTRAP = 50
"""Resamples behind ``evaluate``'s intervals (the table shows point values only; they do not
depend on it)."""
DEFAULT_DATA = Path(os.environ.get("JUDGEFUSE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


@dataclass(frozen=True)
class Column:
    title: str
    metric: str
    text: Callable[[float], str]
    higher_is_better: bool


@dataclass(frozen=True)
class Table:
    data: str
    """The data set's folder under the shared data."""
    methods: tuple[str, ...]
    """The fusion rows, in the page's order, after the judges (by accuracy, best first)."""
    highlight: str
    """The row shown bold (and its cells that are the best of their column)."""
    columns: tuple[Column, ...]
    judges_shown: int | None = None
    """The most accurate judges shown (None: every judge)."""


def percent(value: float) -> str:
    return f"{100 * value:.1f}"


def digits(n: int) -> Callable[[float], str]:
    return lambda value: f"{value:.{n}f}"


REPLAY_COLUMNS = (
    Column("Acc %", "accuracy", percent, True),
    Column("ECE %", "ece", percent, False),
    Column("Brier", "brier", digits(3), False),
    Column("NLL", "nll", digits(3), False),
    Column("TH", "th_score", digits(2), True),
)
"""The columns both replay tables show."""

TABLES = {
    "judgebench": Table(
        data="judgebench",
        methods=(
            "majority",
            "confidence_weighted",
            "entropy_weighted",
            "mean_probability",
            "majority+platt",
            "stacked",
        ),
        highlight="stacked",
        columns=(
            *REPLAY_COLUMNS,
            Column("MacroCE %", "macroce", percent, False),
            Column("AUROC", "auroc", digits(3), True),
        ),
        judges_shown=3,
    ),
    "trust_or_escalate": Table(
        data="trust_or_escalate",
        methods=("majority", "entropy_weighted", "mean_probability", "stacked"),
        highlight="stacked",
        columns=REPLAY_COLUMNS,
    ),
}

NAMES = {"stacked": "stacked (cross-fitted)"}
"""How the page names a row whose name alone would hide how it was scored."""


def render(table: Table, rows: Sequence[RowReport]) -> str:
    """The Markdown table of ``rows`` (an evaluation's judges and methods)."""
    judges = sorted((r for r in rows if r.row.kind == "judge"), key=lambda r: -r.metrics["accuracy"])
    judges = judges[: table.judges_shown]
    by_name = {r.row.name: r for r in rows if r.row.kind != "judge"}
    shown = [*judges, *(by_name[m] for m in table.methods)]
    best = {
        c.metric: (max if c.higher_is_better else min)(float(c.text(r.metrics[c.metric])) for r in shown)
        for c in table.columns
    }
    lines = [
        "| judge / method | " + " | ".join(c.title for c in table.columns) + " |",
        "|---" * (len(table.columns) + 1) + "|",
    ]
    for report in shown:
        name = report.row.name
        cells = [c.text(report.metrics[c.metric]) for c in table.columns]
        if name == table.highlight:
            cells = [
                f"**{cell}**" if float(cell) == best[c.metric] else cell
                for c, cell in zip(table.columns, cells, strict=True)
            ]
            label = f"**{name}**" + NAMES.get(name, name)[len(name) :]
        else:
            label = NAMES.get(name, name)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Grid:
    """One row per data set, one ``Acc / ECE`` cell per method (each data set's own evaluation)."""

    rows: tuple[tuple[str, str], ...]
    """(label, data folder); ``{n}`` in the label is the data set's number of judges."""
    methods: tuple[tuple[str, str], ...]
    """(method, column title), in the page's order."""
    bold: frozenset[tuple[str, str]] = frozenset()
    """(data folder, method) whose accuracy the page shows bold."""


GRIDS = {
    "cold_start": Grid(
        rows=(
            ("JudgeBench ({n} judges)", "judgebench"),
            ("Trust-or-Escalate ({n})", "trust_or_escalate"),
            ("LLMBar decisions ({n})", "llmbar"),
        ),
        methods=(
            ("majority", "majority Acc / ECE"),
            ("mean_probability", "mean_probability"),
            ("dawid_skene", "dawid_skene (no labels)"),
            ("dawid_skene+platt", "dawid_skene+platt"),
            ("stacked", "stacked"),
        ),
        bold=frozenset({("llmbar", "dawid_skene")}),  # label-free, yet 11 points over majority
    ),
}


def render_grid(grid: Grid, evaluations: dict[str, tuple[int, Sequence[RowReport]]]) -> str:
    """The Markdown grid from each data set's (number of judges, rows)."""
    lines = [
        "| data | " + " | ".join(title for _, title in grid.methods) + " |",
        "|---" * (len(grid.methods) + 1) + "|",
    ]
    for label, data in grid.rows:
        n_judges, rows = evaluations[data]
        by_name = {r.row.name: r for r in rows}
        cells = []
        for method, _ in grid.methods:
            m = by_name[method].metrics
            accuracy = percent(m["accuracy"])
            cells.append(f"{f'**{accuracy}**' if (data, method) in grid.bold else accuracy} / {percent(m['ece'])}")
        lines.append(f"| {label.format(n=n_judges)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def compute(name: str, data: Path = DEFAULT_DATA) -> str:
    """Table ``name`` of :data:`TABLES` or :data:`GRIDS`, computed from ``data`` as
    ``judgefuse eval`` does."""
    if name in GRIDS:
        grid = GRIDS[name]
        methods = tuple(method for method, _ in grid.methods)
        evaluations = {}
        for _, folder in grid.rows:
            items = load(data / folder)
            evaluation = evaluate(items, options=EvaluationOptions(methods=methods, n_bootstrap=BOOTSTRAP))
            judges = [r for r in evaluation.rows if r.row.kind == "judge"]
            evaluations[folder] = (len(judges), evaluation.rows)
        return render_grid(grid, evaluations)
    table = TABLES[name]
    items = load(data / table.data)
    evaluation = evaluate(items, options=EvaluationOptions(methods=table.methods, n_bootstrap=BOOTSTRAP))
    return render(table, evaluation.rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", choices=sorted([*TABLES, *GRIDS]))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared data (default ../shared/data)")
    args = parser.parse_args()
    print(compute(args.table, args.data))


if __name__ == "__main__":
    main()
