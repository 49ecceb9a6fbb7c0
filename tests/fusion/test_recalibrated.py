"""Recalibrated fusion: a base method's confidence mapped through a fitted recalibrator."""

from __future__ import annotations

import numpy as np
import pytest

from judgefuse.calibration.recalibration import IsotonicCalibration
from judgefuse.fusion import (
    NotEnoughLabels,
    NotFitted,
    Recalibrated,
    StackedFusion,
    cross_fit_predict,
    get_method,
    majority,
)
from judgefuse.judges.types import JudgeVote


def ece(c: np.ndarray, z: np.ndarray, n_bins: int = 10) -> float:
    idx = np.minimum((c * n_bins).astype(int), n_bins - 1)
    return float(
        sum((idx == b).mean() * abs(z[idx == b].mean() - c[idx == b].mean()) for b in range(n_bins) if (idx == b).any())
    )


def panel(n: int = 1200, seed: int = 0) -> tuple[list[list[JudgeVote]], list[str]]:
    """Three independent judges, each right 60% of the time and claiming 0.95."""
    rng = np.random.default_rng(seed)
    labels = ["A" if rng.random() < 0.5 else "B" for _ in range(n)]
    batches = []
    for y in labels:
        votes = []
        for j in range(3):
            right = rng.random() < 0.6
            choice = y if right else ("B" if y == "A" else "A")
            votes.append(JudgeVote(judge=f"j{j}", mode="sc", choice=choice, confidence=0.95))
        if rng.random() < 0.05:
            votes = [JudgeVote.invalid("j0", "sc", "timeout")] + votes[1:]
        batches.append(votes)
    return batches, labels


def scores(verdicts, labels) -> tuple[np.ndarray, np.ndarray]:
    c = np.array([v.confidence for v in verdicts])
    z = np.array([float(v.choice == y) for v, y in zip(verdicts, labels, strict=True)])
    return c, z


@pytest.mark.parametrize("recal", ["platt", "temperature", "isotonic", "histogram"])
def test_recalibrated_majority_reduces_ece(recal: str) -> None:
    batches, labels = panel()
    raw = [majority(b) for b in batches]
    fixed = cross_fit_predict(f"majority+{recal}", batches, labels)
    assert [v.choice for v in fixed] == [v.choice for v in raw]  # choice kept
    before, after = ece(*scores(raw, labels)), ece(*scores(fixed, labels))
    # majority's confidence takes two values (2/3, 1): Platt/isotonic/histogram can map both,
    # one temperature cannot, so it only has to help
    assert before > 0.08 and after < (before if recal == "temperature" else before / 2)
    v = fixed[0]
    assert v.method == f"majority+{recal}"
    assert v.p_a == pytest.approx(v.confidence if v.choice == "A" else 1 - v.confidence)
    assert any("recalibrated" in n for n in v.notes)


def test_fit_and_call_in_sample() -> None:
    batches, labels = panel(300)
    method = Recalibrated(get_method("majority"), IsotonicCalibration())
    with pytest.raises(NotFitted):
        method(batches[0])
    method.fit(batches, labels)
    unanimous = [b for b in batches if len({v.choice for v in b}) == 1 and all(v.valid for v in b)]
    v = method(unanimous[0])
    assert v.confidence < 0.95 and v.votes == unanimous[0]
    undecided = method([JudgeVote.invalid("j0", "sc", "timeout")])
    assert undecided.choice is None and undecided.method == "majority+isotonic"
    with pytest.raises(NotEnoughLabels):
        Recalibrated(get_method("majority"), IsotonicCalibration()).fit(batches[:3], labels[:3])


def test_recalibrated_stacked_uses_out_of_fold_confidences() -> None:
    batches, labels = panel(400, seed=3)
    method = get_method("stacked", recalibrate="isotonic")
    method.fit(batches, labels)
    assert isinstance(method.base, StackedFusion) and method.base.fitted
    v = method(batches[0])
    assert v.method == "stacked+isotonic" and v.model_version == method.model_version != method.base.model_version
    out = cross_fit_predict(lambda: get_method("stacked+platt"), batches, labels)
    c, z = scores(out, labels)
    assert ece(c, z) < 0.08
