"""``judgefuse compare``'s report in the terminal, as JSON and as HTML.

The terminal shows the views table and its findings (:mod:`judgefuse.evaluation.comparison`),
then every judge on the common pool, then the self-preference report, or one line saying why
there is none, then, when a label or an answer is a tie, ``eval``'s ties table for every judge. Judge names are shortened to fit and listed in a legend, as in ``eval``.
``--json`` writes the same numbers in machine-readable form, and ``--html`` writes them as one
self-contained page.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from rich.console import Console
from rich.table import Table

from judgefuse.calibration.comparison import ViewDifference
from judgefuse.evaluation.candidate_aligned import ANSWER_MODEL_KEYS, SelfPreference
from judgefuse.evaluation.comparison import (
    VIEW_LABELS,
    VIEWS,
    CompareReport,
    findings,
    print_comparison,
    reversals,
    view_size,
)
from judgefuse.evaluation.display import compact_table, legend, natural_width, short_names
from judgefuse.evaluation.table import TIES_CAPTION, fmt, ties_table

__all__ = ["compare_html", "compare_json", "print_compare_report"]

NAME_LIMITS = (40, 28, 18, 10)
_PAGES = Environment(
    loader=PackageLoader("judgefuse.evaluation", "templates"), autoescape=True, undefined=StrictUndefined,
    trim_blocks=True, lstrip_blocks=True,
)  # fmt: skip
NO_SELF_PREFERENCE = (
    "self-preference: no item names the models of its two answers from two different families "
    f"one of which is a judge's ({' / '.join('+'.join(keys) for keys in ANSWER_MODEL_KEYS)} in the item metadata)"
)


def _pct(value: float, digits: int = 1) -> str:
    return "-" if math.isnan(value) else f"{100 * value:.{digits}f}"


def pool_table(report: CompareReport, limit: int) -> tuple[Table, dict[str, str]]:
    names = short_names([row.judge for row in report.pool], limit)
    table = compact_table(
        f"every judge on the common pool: {report.pool_size} labelled items all {len(report.pool)} judges voted on",
        caption="agree %: mean share of pool items where it chose as another judge did; CA: candidate-aligned",
    )
    for header in ("judge", "n", "acc %", "agree %", "CA-ECE %", "CA-Brier"):
        table.add_column(header, justify="left" if header == "judge" else "right", no_wrap=True)
    for row in report.pool:
        table.add_row(
            names[row.judge],
            str(row.n),
            _pct(row.accuracy),
            _pct(row.agreement),
            fmt("ece", row.ca_ece),
            fmt("brier", row.ca_brier),
        )
    return table, names


def _signed_points(value: float) -> str:
    return "-" if math.isnan(value) else f"{100 * value:+.1f}"


def preference_table(rows: list[SelfPreference], limit: int) -> tuple[Table, dict[str, str]]:
    names = short_names([row.judge for row in rows], limit)
    table = compact_table(
        "self-preference: items where exactly one answer comes from the judge's model family",
        caption="own %: the judge (label) picks its family's answer; excess = judge - label, points, "
        "[..]: 95% bootstrap; errors: own answer picked when the other was better / the reverse",
    )
    for header in ("judge", "family", "n", "judge own %", "label own %", "excess", "errors"):
        table.add_column(header, justify="left" if header in ("judge", "family") else "right", no_wrap=True)
    for row in rows:
        table.add_row(
            names[row.judge],
            row.family,
            str(row.n_decided),
            _pct(row.chose_own),
            _pct(row.label_own),
            f"{_signed_points(row.excess)} [{_signed_points(row.low)}, {_signed_points(row.high)}]",
            f"{row.own_when_other_better} / {row.other_when_own_better}",
        )
    return table, names


def _print_named(console: Console, build: Callable[[int], tuple[Table, dict[str, str]]]) -> None:
    """The table with the longest names that fits the console, and the legend of shortened names."""
    for limit in NAME_LIMITS:
        table, names = build(limit)
        if natural_width(console, table) <= console.width:
            break
    console.print(table)
    shortened = legend(names)
    if shortened:
        console.print("names: " + "; ".join(shortened), highlight=False, markup=False)


def print_compare_report(report: CompareReport, *, console: Console) -> None:
    """The views and their findings, the common pool, and the self-preference report."""
    print_comparison(report.evidence, report.judge_1, report.judge_2, console=console)
    console.print()
    if report.pool_size:
        _print_named(console, lambda limit: pool_table(report, limit))
    else:
        console.print("common pool: no labelled item was voted on by every judge", highlight=False)
    console.print()
    if report.self_preference:
        _print_named(console, lambda limit: preference_table(report.self_preference, limit))
        for row in report.self_preference:
            if row.excludes_zero and row.excess > 0:
                console.print(
                    f"{row.judge} prefers its own family's answers ({row.family}): "
                    f"{_signed_points(row.excess)} points over the labels, interval excludes 0",
                    highlight=False,
                    markup=False,
                )
    else:
        console.print(NO_SELF_PREFERENCE, highlight=False, markup=False)
    if report.has_ties:
        console.print()
        _print_named(console, lambda limit: _ties_named(report, limit))
        console.print(TIES_CAPTION, highlight=False, markup=False)


def _ties_named(report: CompareReport, limit: int) -> tuple[Table, dict[str, str]]:
    names = short_names([t.name for t in report.ties], limit)
    return ties_table(report.ties, names), names


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_clean(item) for item in value]
    return value


def _view(diff: ViewDifference, n: int) -> dict[str, Any]:
    return {
        "metric": diff.metric,
        "view": diff.view,
        "n": n,
        "score_1": diff.score_1,
        "score_2": diff.score_2,
        "difference": diff.difference,
        "ci95": [diff.interval.low, diff.interval.high],
        "flips": diff.flips,
    }


def compare_dict(report: CompareReport, *, sources: list[str]) -> dict[str, Any]:
    """The report as plain data (NaN as None)."""
    evidence = report.evidence
    result = evidence.comparison
    views = [
        _view(evidence.differences[(metric, view)], view_size(evidence, view))
        for metric in ("ece", "brier")
        for view in VIEWS
    ]
    return _clean(
        {
            "sources": sources,
            "judges": {"1": report.judge_1, "2": report.judge_2},
            "accuracy": {"1": result.accuracy_1, "2": result.accuracy_2},
            "views": views,
            "reversals": [{"metric": m, "view": v} for m, v in reversals(evidence)],
            "findings": findings(evidence, report.judge_1, report.judge_2),
            "common_pool": {
                "n": report.pool_size,
                "judges": [
                    {
                        "judge": r.judge,
                        "n": r.n,
                        "accuracy": r.accuracy,
                        "agreement": r.agreement,
                        "ca_ece": r.ca_ece,
                        "ca_brier": r.ca_brier,
                    }
                    for r in report.pool
                ],  # fmt: skip
            },
            "self_preference": [
                {
                    "judge": r.judge,
                    "family": r.family,
                    "n": r.n,
                    "n_decided": r.n_decided,
                    "n_no_answer": r.n_no_answer,
                    "chose_own": r.chose_own,
                    "label_own": r.label_own,
                    "excess": r.excess,
                    "ci95": [r.low, r.high],
                    "own_when_other_better": r.own_when_other_better,
                    "other_when_own_better": r.other_when_own_better,
                }
                for r in report.self_preference
            ],  # fmt: skip
            "ties": [t.as_dict() for t in report.ties],
        }
    )


def compare_json(report: CompareReport, *, sources: list[str]) -> str:
    return json.dumps(compare_dict(report, sources=sources), indent=2, allow_nan=False) + "\n"


def compare_html(report: CompareReport, *, sources: list[str]) -> str:
    """One self-contained page with the three tables and the findings."""
    return _PAGES.get_template("compare.html.j2").render(
        report=compare_dict(report, sources=sources),
        labels=VIEW_LABELS,
        no_self_preference=NO_SELF_PREFERENCE,
        has_ties=report.has_ties,
        ties_caption=TIES_CAPTION,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )
