"""How much a panel knows before labels, and how many judges it really has (shared by
``judgefuse eval`` and the service's ``GET /v1/calibration``).

* **each judge's accuracy estimated without labels**: Dawid-Skene fitted on every item's votes
  (labels unused), ``P(vote = truth)``, next to its **labelled accuracy** (the share of its hard
  observations, position-swap games counted one each, that match the label: the same quantity,
  measured) where labels exist;
* the **effective number of independent judges** ``k_eff = k / (1 + (k - 1) * rho)``
  (:mod:`judgefuse.calibration.effective_judges`), with ``rho`` the mean pairwise correlation of
  the judges' errors. **Labelled**: an error is "the vote is not the label", over the labelled
  items. **Label-free** (from vote agreement): an error is "the vote is not the Dawid-Skene
  consensus", over every item; two judges that disagree with the consensus on the same items
  count as one.

For the error correlations a judge's vote on an item is its first valid vote there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from judgefuse.calibration.effective_judges import effective_number
from judgefuse.fusion.dawid_skene import DawidSkeneFusion, observations
from judgefuse.judges.types import JudgeVote, Letter

__all__ = ["JudgeEstimate", "PanelStructure", "panel_structure"]

DEFINITION = (
    "k_eff = k / (1 + (k - 1) * rho), rho = mean pairwise correlation of the judges' errors "
    "(labelled: vote != label; label-free: vote != Dawid-Skene consensus); rho clipped at 0 "
    "below; pairs need >= 10 shared items and varying errors"
)


@dataclass(frozen=True)
class JudgeEstimate:
    judge: str
    n_votes: int
    """Items with a valid vote of this judge."""
    labelled_accuracy: float | None
    """Share of this judge's hard observations on labelled items that match the label."""
    estimated_accuracy: float | None
    """Dawid-Skene's label-free estimate of P(vote = truth)."""
    n_labelled_observations: int = 0


@dataclass(frozen=True)
class PanelStructure:
    judges: list[JudgeEstimate]
    effective_judges_labelled: float | None
    error_correlation_labelled: float | None
    effective_judges_unlabelled: float | None
    error_correlation_unlabelled: float | None
    n_items: int = 0
    n_labelled: int = 0
    definition: str = DEFINITION

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "judges": [asdict(e) for e in self.judges]}


def panel_structure(
    batches: Sequence[Sequence[JudgeVote]], labels: Sequence[Letter | None]
) -> PanelStructure | None:
    """The panel's label-free accuracies and effective size (module docstring); None with
    fewer than two judges or no valid observation to fit Dawid-Skene on."""
    if len(batches) != len(labels):
        raise ValueError(f"length mismatch: {len(batches)} batches, {len(labels)} labels")
    names = sorted({v.judge for votes in batches for v in votes})
    if len(names) < 2:
        return None
    index = {name: j for j, name in enumerate(names)}
    choices = np.full((len(batches), len(names)), None, dtype=object)
    for i, votes in enumerate(batches):
        for vote in votes:
            if vote.choice is not None and choices[i, index[vote.judge]] is None:
                choices[i, index[vote.judge]] = vote.choice
    ds = DawidSkeneFusion()
    try:
        ds.fit_unlabelled(batches)
    except ValueError:
        return None
    consensus = ds.choices(batches)

    def errors_against(reference: Sequence[str | None]) -> np.ndarray:
        out = np.full(choices.shape, np.nan)
        for i, truth in enumerate(reference):
            if truth is None:
                continue
            for j in range(len(names)):
                if choices[i, j] is not None:
                    out[i, j] = float(choices[i, j] != truth)
        return out

    hits: dict[str, list[float]] = {name: [] for name in names}
    for votes, label in zip(batches, labels, strict=True):
        if label is not None:
            for judge, letter in observations(votes):
                hits[judge].append(float(letter == label))
    estimated = ds.estimated_accuracy
    estimates = [
        JudgeEstimate(
            judge=name,
            n_votes=int(sum(c is not None for c in choices[:, j])),
            labelled_accuracy=float(np.mean(hits[name])) if hits[name] else None,
            estimated_accuracy=estimated.get(name),
            n_labelled_observations=len(hits[name]),
        )
        for name, j in index.items()
    ]
    k_lab, rho_lab = effective_number(errors_against(labels))
    k_unl, rho_unl = effective_number(errors_against(consensus))
    return PanelStructure(estimates, k_lab, rho_lab, k_unl, rho_unl, n_items=len(batches),
                          n_labelled=sum(label is not None for label in labels))
