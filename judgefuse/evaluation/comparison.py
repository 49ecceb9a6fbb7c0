"""``judgefuse compare``: the accuracy-controlled comparison of two judges (seed 000, sec. 4).

Both judges are scored on the labelled items they *both* voted on (aligned by item), with the
same no-answer rule as every report row (see :mod:`judgefuse.evaluation.scoring`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.table import Table

from judgefuse.calibration import JudgeComparison, compare_judges
from judgefuse.evaluation.scoring import judge_names, score_judge
from judgefuse.evaluation.table import fmt
from judgefuse.judges.types import JudgedItem

VIEWS = ("raw", "instance_aligned", "distribution_aligned")


def compare_rows(
    items: Sequence[JudgedItem], judge_1: str, judge_2: str, *, n_bins: int = 10
) -> JudgeComparison:
    """Compare two named judges on their common labelled items."""
    known = judge_names(items)
    for name in (judge_1, judge_2):
        if name not in known:
            raise ValueError(f"unknown judge {name!r}; judges in the data: {', '.join(known)}")
    row_1, row_2 = score_judge(judge_1, items), score_judge(judge_2, items)
    _, in_1, in_2 = np.intersect1d(row_1.item_index, row_2.item_index, return_indices=True)
    if in_1.size == 0:
        raise ValueError(f"{judge_1!r} and {judge_2!r} share no labelled item")
    return compare_judges(
        row_1.confidence[in_1], row_1.correct[in_1], row_2.confidence[in_2], row_2.correct[in_2], n_bins=n_bins
    )


def comparison_table(result: JudgeComparison, judge_1: str, judge_2: str) -> Table:
    """ECE and Brier of both judges under each view, with the reversal verdict in the caption."""
    table = Table(
        title=f"{judge_1} vs {judge_2}: accuracy {fmt('accuracy', result.accuracy_1)}% vs "
        f"{fmt('accuracy', result.accuracy_2)}%",
        title_justify="left",
        caption="ranking reversal: YES, the raw ranking is an artefact of accuracy"
        if result.ranking_reversal
        else "ranking reversal: no, the raw ranking survives accuracy control",
        caption_justify="left",
    )
    for header in ("view", "n", f"ECE % {judge_1}", f"ECE % {judge_2}", f"Brier {judge_1}", f"Brier {judge_2}"):
        table.add_column(header, justify="left" if header == "view" else "right")
    for view_name in VIEWS:
        view = getattr(result, view_name)
        table.add_row(
            view_name,
            str(view.n),
            fmt("ece", view.ece_1),
            fmt("ece", view.ece_2),
            fmt("brier", view.brier_1),
            fmt("brier", view.brier_2),
        )
    return table
