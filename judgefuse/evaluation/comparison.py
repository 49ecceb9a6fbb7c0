"""``judgefuse compare``: the accuracy-controlled comparison of two judges
("When Calibration Rankings Reverse", section 4).

Both judges are scored on the labelled items they *both* voted on (aligned by item), with the
same no-answer rule as every report row (see :mod:`judgefuse.evaluation.scoring`). For each
metric (ECE, Brier) and view (raw, instance-aligned, distribution-aligned, candidate-aligned)
the table gives both scores, their difference with a paired bootstrap interval, and whether the
view's order flips the raw one. The words under the table follow the evidence: a **ranking
reversal** is named (metric and view) only where the raw difference's interval excludes 0 and an
aligned view flips. The candidate-aligned view (section 4.3) scores both answers of every item
as candidates (:mod:`judgefuse.evaluation.candidate_aligned`); :func:`compare_report` adds every
judge on the common pool, the self-preference report and every judge's ties table (as ``eval``'s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from rich.console import Console
from rich.table import Table

from judgefuse.calibration.comparison import ComparisonEvidence, ViewDifference, compare_judges_with_intervals
from judgefuse.calibration.metric_registry import get_metric
from judgefuse.errors import InputError
from judgefuse.evaluation.candidate_aligned import (
    CA_VIEW,
    CandidateScores,
    PoolRow,
    SelfPreference,
    candidate_differences,
    candidate_scores,
    common_pool,
    self_preference,
)
from judgefuse.evaluation.display import compact_table, fit
from judgefuse.evaluation.scoring import ScoredRow, judge_names, score_judge
from judgefuse.evaluation.table import fmt
from judgefuse.evaluation.ties import TieReport, has_ties, judge_ties
from judgefuse.judges.types import JudgedItem

VIEWS = ("raw", "instance_aligned", "distribution_aligned", CA_VIEW)
VIEW_LABELS = {
    "raw": "raw",
    "instance_aligned": "instance-aligned",
    "distribution_aligned": "distribution-aligned",
    CA_VIEW: "candidate-aligned",
}
SHORT_VIEW_LABELS = {
    "raw": "raw",
    "instance_aligned": "inst.-aligned",
    "distribution_aligned": "distr.-aligned",
    CA_VIEW: "cand.-aligned",
}


class CompareError(InputError, ValueError):
    """The two judges named by ``--judges`` cannot be compared (unknown, the same judge twice,
    or no labelled item in common)."""


def compare_rows(
    items: Sequence[JudgedItem],
    judge_1: str,
    judge_2: str,
    *,
    n_bins: int = 10,
    n_resamples: int = 1000,
    seed: int = 0,
) -> ComparisonEvidence:
    """Compare two named judges on their common labelled items, with bootstrap intervals."""
    check_judges(judge_names(items), judge_1, judge_2)
    return compare_scored(
        score_judge(judge_1, items),
        score_judge(judge_2, items),
        lambda name, common: candidate_scores(name, items, only=common),
        n_bins=n_bins,
        n_resamples=n_resamples,
        seed=seed,
    )


def check_judges(known: Sequence[str], judge_1: str, judge_2: str) -> None:
    """Refuse (:class:`CompareError`) a judge not in ``known`` (the data's, in order) or one judge twice."""
    for name in (judge_1, judge_2):
        if name not in known:
            raise CompareError(f"--judges: unknown judge {name!r}; judges in the data: {', '.join(known)}")
    if judge_1 == judge_2:
        raise CompareError(f"--judges: name two different judges (got {judge_1!r} twice)")


def compare_scored(
    row_1: ScoredRow,
    row_2: ScoredRow,
    candidates: Callable[[str, np.ndarray], CandidateScores],
    *,
    n_bins: int,
    n_resamples: int,
    seed: int,
) -> ComparisonEvidence:
    """:func:`compare_rows` from the two judges' scored rows (judged items' or their arrays') and
    ``candidates(name, positions)``, the judge's candidate scores on those item positions."""
    judge_1, judge_2 = row_1.name, row_2.name
    _, in_1, in_2 = np.intersect1d(row_1.item_index, row_2.item_index, return_indices=True)
    if in_1.size == 0:
        raise CompareError(f"--judges: {judge_1!r} and {judge_2!r} share no labelled item")
    evidence = compare_judges_with_intervals(
        row_1.confidence[in_1],
        row_1.correct[in_1],
        row_2.confidence[in_2],
        row_2.correct[in_2],
        n_bins=n_bins,
        n_resamples=n_resamples,
        seed=seed,
    )
    common = row_1.item_index[in_1]
    raw = evidence.comparison.raw
    candidate = candidate_differences(
        candidates(judge_1, common),
        candidates(judge_2, common),
        raw_winners={metric: raw.winner(metric) for metric in ("ece", "brier")},
        n_bins=n_bins,
        n_resamples=n_resamples,
        seed=seed,
    )
    return ComparisonEvidence(evidence.comparison, {**evidence.differences, **candidate})


def reversals(evidence: ComparisonEvidence) -> list[tuple[str, str]]:
    """(metric, aligned view) where the raw difference's interval excludes 0 and that view
    flips the order, the candidate-aligned view included."""
    found = list(evidence.reversals())
    for metric in ("ece", "brier"):
        if evidence.differences[(metric, "raw")].excludes_zero and evidence.differences[(metric, CA_VIEW)].flips:
            found.append((metric, CA_VIEW))
    return found


def view_size(evidence: ComparisonEvidence, view: str) -> int:
    """Instances a view scores: items, except the candidate-aligned view's two answers per item."""
    if view == CA_VIEW:
        return 2 * evidence.comparison.raw.n
    return int(getattr(evidence.comparison, view).n)


@dataclass(frozen=True)
class CompareReport:
    """Everything ``judgefuse compare`` reports: the two judges' views, every judge on the common
    pool, and the self-preference of the judges whose family owns one answer of an item."""

    judge_1: str
    judge_2: str
    evidence: ComparisonEvidence
    pool: list[PoolRow]
    pool_size: int
    self_preference: list[SelfPreference]
    ties: list[TieReport] = field(default_factory=list)
    """Every judge's tie-aware numbers (:mod:`.ties`), as in ``eval``'s ties table."""

    @property
    def has_ties(self) -> bool:
        """True when a label or an answer is a tie (the ties table is shown)."""
        return has_ties(self.ties)


def compare_report(
    items: Sequence[JudgedItem],
    judge_1: str,
    judge_2: str,
    *,
    n_bins: int = 10,
    n_resamples: int = 1000,
    seed: int = 0,
) -> CompareReport:
    """:func:`compare_rows`, the common pool and the self-preference report."""
    evidence = compare_rows(items, judge_1, judge_2, n_bins=n_bins, n_resamples=n_resamples, seed=seed)
    pool, pool_size = common_pool(items, n_bins=n_bins)
    preference = self_preference(items, n_resamples=n_resamples, seed=seed)
    ties = [judge_ties(name, items) for name in judge_names(items)]
    return CompareReport(judge_1, judge_2, evidence, pool, pool_size, preference, ties)


def _value(metric: str, value: float) -> str:
    return fmt(metric, value)


def _signed(metric: str, value: float, digits: int) -> str:
    scale = 100.0 if metric == "ece" else 1.0
    return f"{scale * value:+.{digits}f}"


def _difference(diff: ViewDifference, inline: bool) -> str:
    metric, interval = diff.metric, diff.interval
    digits = 2 if metric == "ece" else 3
    if interval.low != interval.low:  # NaN: the view is undefined on (almost) every resample
        return f"{_signed(metric, diff.difference, digits)} [-]"
    bracket = f"[{_signed(metric, interval.low, digits)}, {_signed(metric, interval.high, digits)}]"
    return f"{_signed(metric, diff.difference, digits)}{' ' if inline else chr(10)}{bracket}"


def _order(diff: ViewDifference, narrow: bool) -> str:
    winner = "1" if diff.score_1 < diff.score_2 else "2" if diff.score_2 < diff.score_1 else None
    if winner is None:
        return "tie"
    text = winner if narrow else f"{winner} lower"
    return f"{text}, flips" if diff.flips else text


@dataclass(frozen=True)
class _Layout:
    inline: bool
    narrow: bool


LAYOUTS = (_Layout(True, False), _Layout(False, False), _Layout(False, True))


def comparison_table(
    evidence: ComparisonEvidence, judge_1: str, judge_2: str, *, layout: _Layout = LAYOUTS[0]
) -> Table:
    """Both scores, the difference (1 - 2) with its interval, and the order, per metric and view."""
    result = evidence.comparison
    title = (
        f"1 = {judge_1} (accuracy {fmt('accuracy', result.accuracy_1)}%), "
        f"2 = {judge_2} (accuracy {fmt('accuracy', result.accuracy_2)}%)"
    )
    caption = (
        "difference = 1 - 2 (lower is better); [..]: paired 95% bootstrap interval; "
        "candidate-aligned: both answers of each item scored as candidates (n counts answers)"
    )
    if layout.narrow:
        caption += "; order: the judge with the lower score"
    table = compact_table(title, caption=caption)
    headers = ("metric", "view", "n", "1", "2", "difference", "order") if layout.narrow else (
        "metric", "view", "n", "judge 1", "judge 2", "difference", "order"
    )
    for header in headers:
        table.add_column(header, justify="left" if header in ("metric", "view", "order") else "right", no_wrap=True)
    for metric in ("ece", "brier"):
        if table.rows:
            table.add_section()
        for view in VIEWS:
            diff = evidence.differences[(metric, view)]
            table.add_row(
                get_metric(metric).header(),
                (SHORT_VIEW_LABELS if layout.narrow else VIEW_LABELS)[view],
                str(view_size(evidence, view)),
                _value(metric, diff.score_1),
                _value(metric, diff.score_2),
                _difference(diff, layout.inline),
                _order(diff, layout.narrow),
            )
    return table


def findings(evidence: ComparisonEvidence, judge_1: str, judge_2: str) -> list[str]:
    """What the comparison shows, one sentence per metric, in words the intervals support."""
    lines = []
    found = reversals(evidence)
    for metric in ("ece", "brier"):
        label = "ECE" if metric == "ece" else "Brier"
        raw = evidence.differences[(metric, "raw")]
        flipped = [VIEW_LABELS[view] for view in VIEWS[1:] if evidence.differences[(metric, view)].flips]
        if raw.excludes_zero:
            better = judge_1 if raw.difference < 0 else judge_2
            named = [VIEW_LABELS[view] for m, view in found if m == metric]
            if named:
                lines.append(
                    f"{label}: ranking reversal under {' and '.join(named)}: {better} is better on raw {label} "
                    f"(interval excludes 0) but worse once accuracy is controlled, so the raw ranking is an "
                    "artefact of accuracy."
                )
            else:
                lines.append(f"{label}: {better} is better (raw interval excludes 0), and every aligned view agrees.")
        elif flipped:
            lines.append(
                f"{label}: no reliable difference (the raw interval contains 0); the order under "
                f"{' and '.join(flipped)} differs, but a raw order within resampling noise is not a ranking to "
                "reverse: no reversal."
            )
        else:
            lines.append(f"{label}: no reliable difference (the raw interval contains 0).")
    same = [
        math.isclose(evidence.differences[(m, "raw")].score_1, evidence.differences[(m, CA_VIEW)].score_1, abs_tol=1e-12)
        and math.isclose(evidence.differences[(m, "raw")].score_2, evidence.differences[(m, CA_VIEW)].score_2, abs_tol=1e-12)
        for m in ("ece", "brier")
    ]
    if all(same):
        lines.append(
            "candidate-aligned: equal to raw here: a pairwise judge scores both answers of every item, with "
            "confidences that mirror each other, so the pool was aligned already (the views differ only on "
            "items a judge left without an answer)."
        )
    lines.append(f"ranking reversal: {'YES' if found else 'no'}")
    return lines


def print_comparison(
    evidence: ComparisonEvidence, judge_1: str, judge_2: str, *, console: Console | None = None
) -> None:
    """The table in the first layout that fits the console (full names in its title), then the findings."""
    console = console or Console()
    table, _layout = fit(console, LAYOUTS, lambda lay: comparison_table(evidence, judge_1, judge_2, layout=lay))
    console.print(table)
    for line in findings(evidence, judge_1, judge_2):
        console.print(line, highlight=False)
