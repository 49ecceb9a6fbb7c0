"""The HTML report: Jinja2 template, a headline, tables in the paper's units, inline SVG diagrams.

The page is self-contained and responsive: the tables scroll sideways inside their box on a
narrow window, the diagrams fill a grid that keeps each panel at 250 px or more, and each panel's
title (full name, ECE, n) is HTML that wraps instead of being clipped.
"""

from __future__ import annotations

from datetime import UTC, datetime

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from judgefuse.evaluation.headline import excludes_zero, headline
from judgefuse.evaluation.runner import CI_METHOD, Evaluation
from judgefuse.evaluation.scoring import TIE_RULE
from judgefuse.evaluation.svg import reliability_svg
from judgefuse.evaluation.table import TIES_CAPTION, columns, fmt

_ENV = Environment(
    loader=PackageLoader("judgefuse.evaluation", "templates"),
    autoescape=select_autoescape(["html", "j2"]),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters["fmt"] = lambda value, metric: fmt(metric, value)
_ENV.filters["points"] = lambda value: f"{100 * value:+.2f}"
_ENV.filters["pct"] = lambda value: "-" if value is None else f"{100 * value:.1f}"
_ENV.tests["excluding_zero"] = excludes_zero


def render_html(evaluation: Evaluation, *, title: str, sources: list[str]) -> str:
    """The whole report as one self-contained HTML page."""
    diagrams = [
        (report, reliability_svg(report.reliability, title=report.row.name, eps=evaluation.options.eps, fluid=True))
        for report in evaluation.rows
    ]
    return _ENV.get_template("report.html.j2").render(
        title=title,
        sources=sources,
        generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        evaluation=evaluation,
        columns=columns(),
        diagrams=diagrams,
        head=headline(evaluation, n_resamples=evaluation.options.n_bootstrap, seed=evaluation.options.seed),
        ci_method=CI_METHOD,
        tie_rule=TIE_RULE,
        ties_caption=TIES_CAPTION,
    )
