"""The HTML report: Jinja2 template, tables in the paper's units, inline SVG diagrams."""

from __future__ import annotations

from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from judgefuse.evaluation.runner import Evaluation
from judgefuse.evaluation.svg import reliability_svg
from judgefuse.evaluation.table import COLUMNS, fmt

_ENV = Environment(
    loader=PackageLoader("judgefuse.evaluation", "templates"),
    autoescape=select_autoescape(["html", "j2"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["fmt"] = lambda value, metric: fmt(metric, value)


def render_html(evaluation: Evaluation, *, title: str, sources: list[str]) -> str:
    """The whole report as one self-contained HTML page."""
    diagrams = [
        (report.row.name, reliability_svg(report.reliability, title=report.row.name))
        for report in evaluation.rows
    ]
    return _ENV.get_template("report.html.j2").render(
        title=title,
        sources=sources,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        evaluation=evaluation,
        columns=COLUMNS,
        diagrams=diagrams,
    )
