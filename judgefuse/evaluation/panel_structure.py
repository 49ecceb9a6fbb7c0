"""How much a panel knows before labels, and how many judges it really has.

Two numbers a user needs before trusting a big panel:

* **each judge's accuracy estimated without labels** (Dawid-Skene, fitted on every item's votes,
  labels unused) next to its labelled accuracy: how far the label-free cold start can be trusted;
* the **effective number of independent judges**, ``k / (1 + (k - 1) * rho)`` (Kish's design
  effect) with ``rho`` the mean pairwise correlation of the judges' errors. With labels an error is
  "the vote is not the label"; without labels it is "the vote is not the Dawid-Skene consensus".
  Judges that err together add votes, not evidence: ten judges with ``rho = 0.5`` are worth
  fewer than two independent ones.

For the error correlations a judge's vote on an item is its first valid vote there (as in :mod:`.scoring`). A pair of judges
contributes its error correlation over the items both voted on (at least ``MIN_SHARED``, and both
error series must vary); ``rho`` averages the pairs that qualify and is clipped at 0 below.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from judgefuse.fusion.dawid_skene import DawidSkeneFusion, observations
from judgefuse.judges.types import JudgedItem

MIN_SHARED = 10


@dataclass(frozen=True)
class JudgeEstimate:
    judge: str
    n_votes: int
    labelled_accuracy: float | None
    """Share of this judge's hard observations (position-swap games count one each) that match
    the label: the same quantity as ``estimated_accuracy``, measured."""
    estimated_accuracy: float | None
    """Dawid-Skene's label-free estimate (P(vote = truth))."""


@dataclass(frozen=True)
class PanelStructure:
    judges: list[JudgeEstimate]
    effective_judges_labelled: float | None
    error_correlation_labelled: float | None
    effective_judges_unlabelled: float | None
    error_correlation_unlabelled: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "judges": [e.__dict__ for e in self.judges],
            "effective_judges_labelled": self.effective_judges_labelled,
            "error_correlation_labelled": self.error_correlation_labelled,
            "effective_judges_unlabelled": self.effective_judges_unlabelled,
            "error_correlation_unlabelled": self.error_correlation_unlabelled,
        }


def effective_number(errors: np.ndarray) -> tuple[float | None, float | None]:
    """(k_eff, mean rho) from an (items x judges) matrix of 0/1 errors with NaN for no vote."""
    k = errors.shape[1]
    rhos = []
    for a in range(k):
        for b in range(a + 1, k):
            both = ~np.isnan(errors[:, a]) & ~np.isnan(errors[:, b])
            x, y = errors[both, a], errors[both, b]
            if both.sum() >= MIN_SHARED and x.std() > 0 and y.std() > 0:
                rhos.append(float(np.corrcoef(x, y)[0, 1]))
    if not rhos:
        return None, None
    rho = max(0.0, float(np.mean(rhos)))
    return k / (1.0 + (k - 1) * rho), float(np.mean(rhos))


def panel_structure(items: Sequence[JudgedItem]) -> PanelStructure | None:
    """The panel's label-free accuracies and effective size; None with fewer than two judges."""
    names = sorted({v.judge for judged in items for v in judged.votes})
    if len(names) < 2:
        return None
    index = {name: j for j, name in enumerate(names)}
    choices = np.full((len(items), len(names)), None, dtype=object)
    for i, judged in enumerate(items):
        for vote in judged.votes:
            if vote.choice is not None and choices[i, index[vote.judge]] is None:
                choices[i, index[vote.judge]] = vote.choice
    ds = DawidSkeneFusion()
    try:
        consensus = [v.choice for v in ds.predict([judged.votes for judged in items])]
    except ValueError:
        return None
    estimated = ds.estimated_accuracy
    labels = [judged.item.label for judged in items]

    def errors_against(reference: Sequence[str | None]) -> np.ndarray:
        out = np.full(choices.shape, np.nan)
        for i, truth in enumerate(reference):
            if truth is None:
                continue
            for j in range(len(names)):
                if choices[i, j] is not None:
                    out[i, j] = float(choices[i, j] != truth)
        return out

    labelled_errors = errors_against(labels)
    hits: dict[str, list[float]] = {name: [] for name in names}
    for judged in items:  # labelled accuracy per observation: the quantity Dawid-Skene estimates
        if judged.item.label is not None:
            for judge, letter in observations(judged.votes):
                hits[judge].append(float(letter == judged.item.label))
    estimates = [
        JudgeEstimate(
            judge=name,
            n_votes=int(sum(c is not None for c in choices[:, j])),
            labelled_accuracy=float(np.mean(hits[name])) if hits[name] else None,
            estimated_accuracy=estimated.get(name),
        )
        for name, j in index.items()
    ]
    k_lab, rho_lab = effective_number(labelled_errors)
    k_unl, rho_unl = effective_number(errors_against(consensus))
    return PanelStructure(estimates, k_lab, rho_lab, k_unl, rho_unl)


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
