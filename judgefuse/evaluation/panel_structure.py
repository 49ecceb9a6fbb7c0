"""How much a panel knows before labels, and how many judges it really has: the eval report's
second table. The numbers are :mod:`judgefuse.fusion.panel_structure`'s (shared with the
service's ``GET /v1/calibration``); this module adapts judged items to it and prints the table.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from judgefuse.calibration.effective_judges import effective_number
from judgefuse.evaluation.vote_table import VoteTable
from judgefuse.fusion.panel_structure import JudgeEstimate, PanelStructure, panel_structure_columns
from judgefuse.fusion.panel_structure import panel_structure as structure_of_votes
from judgefuse.judges.types import JudgedItem

__all__ = ["JudgeEstimate", "PanelStructure", "effective_number", "panel_structure", "print_panel_structure"]


def panel_structure(items: Sequence[JudgedItem]) -> PanelStructure | None:
    """The panel structure of judged items (their votes; their labels where they have one)."""
    return structure_of_votes([judged.votes for judged in items], [judged.item.label for judged in items])


def panel_structure_of_table(table: VoteTable) -> PanelStructure | None:
    """:func:`panel_structure` of a table's labelled items, from its arrays."""
    labelled = table.take(np.flatnonzero(table.items.decided))
    return panel_structure_columns(labelled.votes, labelled.items.label_a, labelled.items.decided)


def print_panel_structure(structure: PanelStructure, console: object) -> None:
    """A small second table under the eval report (rich console)."""
    from rich.table import Table

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    table = Table(title="Panel without labels: Dawid-Skene's estimated judge accuracy vs labelled")
    for column in ("judge", "votes", "labelled acc per game", "estimated acc (no labels)"):
        table.add_column(column, justify="left" if column == "judge" else "right")
    for e in structure.judges:
        table.add_row(e.judge, str(e.n_votes), fmt(e.labelled_accuracy), fmt(e.estimated_accuracy))
    k = len(structure.judges)
    caption = (
        f"effective independent judges (of {k}): {fmt(structure.effective_judges_labelled)} from error "
        f"correlation on labels (mean rho {fmt(structure.error_correlation_labelled)}); "
        f"{fmt(structure.effective_judges_unlabelled)} from disagreement with the Dawid-Skene consensus "
        f"(mean rho {fmt(structure.error_correlation_unlabelled)})"
    )
    table.caption = caption
    console.print(table)  # type: ignore[attr-defined]
