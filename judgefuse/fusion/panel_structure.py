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
from numpy.typing import NDArray

from judgefuse.calibration.effective_judges import effective_number
from judgefuse.fusion.columnar import VoteColumns
from judgefuse.fusion.dawid_skene import DawidSkeneFusion, observations
from judgefuse.judges.types import JudgeVote, Letter

__all__ = ["JudgeEstimate", "PanelStructure", "panel_structure", "panel_structure_columns"]

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


def panel_structure_columns(
    votes: VoteColumns, label_a: NDArray[np.bool_], labelled: NDArray[np.bool_]
) -> PanelStructure | None:
    """:func:`panel_structure` of the items of ``votes`` (``labelled`` marks those with an A/B
    label, ``label_a`` which say A), from the vote arrays: the same numbers."""
    from judgefuse.fusion.columnar_dawid_skene import (
        EXACT_EM_ROWS,
        fit_parts_em,
        game_counts,
        pattern_posteriors,
        posteriors,
    )

    present = np.unique(votes.judge[votes.present]).tolist()
    names = sorted(votes.judges[j] for j in present)
    if len(names) < 2:
        return None
    if not votes.games.any():
        return None
    ds = DawidSkeneFusion()
    ds.model = fit_parts_em([votes], alpha=ds.alpha, max_iter=ds.max_iter)
    rows = np.arange(votes.n_items)
    letters = np.zeros((votes.n_items, len(names)), dtype=np.int8)  # each judge's first valid vote: +1 A, -1 B
    for k, name in enumerate(names):
        mine = (votes.judge == votes.judges.index(name)) & votes.valid
        slot = np.argmax(mine, axis=1)
        letters[:, k] = np.where(mine.any(axis=1), np.where(votes.says_a[rows, slot], 1, -1), 0)
    large = int(np.count_nonzero(votes.games)) > EXACT_EM_ROWS
    p_a, seen = pattern_posteriors(ds.model, votes) if large else posteriors(ds.model, votes)
    consensus = np.where(seen, np.where(p_a >= 0.5, 1, -1), 0)
    n_valid = votes.valid.sum(axis=1)
    single = (n_valid == 1) & (votes.tie.sum(axis=1) == 0)  # ds.choices: one valid vote keeps its letter
    slot = np.argmax(votes.valid, axis=1)
    consensus = np.where(single, np.where(votes.says_a[rows, slot], 1, -1), consensus)

    def errors_against(reference: NDArray[np.int64]) -> NDArray[np.float64]:
        known = (reference != 0)[:, None] & (letters != 0)
        return np.where(known, (letters != reference[:, None]).astype(float), np.nan)

    # each judge's observations on labelled items, and those that match the label (counts: the
    # reference's mean of 0/1 floats is the same integer ratio)
    counts = game_counts(votes, names)[labelled]
    said_label = np.where(label_a[labelled], 1, 0)
    estimated = ds.estimated_accuracy
    estimates = []
    for k, name in enumerate(names):
        n_obs = int(counts[:, 2 * k : 2 * k + 2].sum())
        hits = int(counts[np.arange(said_label.size), 2 * k + said_label].sum())
        estimates.append(JudgeEstimate(
            judge=name, n_votes=int((letters[:, k] != 0).sum()),
            labelled_accuracy=hits / n_obs if n_obs else None,
            estimated_accuracy=estimated.get(name), n_labelled_observations=n_obs,
        ))  # fmt: skip
    label_code = np.where(labelled, np.where(label_a, 1, -1), 0)
    k_lab, rho_lab = effective_number(errors_against(label_code))
    k_unl, rho_unl = effective_number(errors_against(consensus))
    return PanelStructure(estimates, k_lab, rho_lab, k_unl, rho_unl, n_items=votes.n_items,
                          n_labelled=int(labelled.sum()))
