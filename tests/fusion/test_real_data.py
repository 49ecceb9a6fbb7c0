"""Trust-or-Escalate (3 recorded judges, 500 human-labelled pairs): stacked vs voting."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from judgefuse.fusion import cross_fit_predict, get_method
from judgefuse.judges.types import JudgeVote

JUDGES = ("gpt-3.5-turbo", "gpt-4-turbo", "mistral-7b-instruct")
VOTING = ["majority", "confidence_weighted", "sqrt_confidence_weighted", "entropy_weighted", "mean_probability"]


def load(root: Path) -> tuple[list[list[JudgeVote]], list[str]]:
    """Tiny inline loader: p_a = probs[0] / (probs[0] + probs[1]); label A iff human == 1."""
    per_judge = {}
    for judge in JUDGES:
        with (root / "trust_or_escalate" / f"{judge}.calibration.jsonl").open() as fh:
            per_judge[judge] = [json.loads(line) for line in fh if line.strip()]
    rows = per_judge[JUDGES[0]]
    assert all(len(per_judge[j]) == len(rows) == 500 for j in JUDGES)
    batches, labels = [], []
    for i, row in enumerate(rows):
        votes = []
        for judge in JUDGES:
            other = per_judge[judge][i]
            assert other["instruction"] == row["instruction"]  # the same items, in the same order
            p0, p1 = other["probs"][:2]
            votes.append(JudgeVote.from_p_a(judge, "recorded", p0 / (p0 + p1)))
        batches.append(votes)
        labels.append("A" if row["preferences"]["human"] == 1 else "B")
    return batches, labels


def metrics(verdicts, labels) -> dict[str, float]:
    c = np.array([v.confidence for v in verdicts])
    z = np.array([float(v.choice == y) for v, y in zip(verdicts, labels, strict=True)])
    idx = np.minimum((c * 10).astype(int), 9)
    ece = sum((idx == b).mean() * abs(z[idx == b].mean() - c[idx == b].mean()) for b in range(10) if (idx == b).any())
    return {"acc": float(z.mean()), "brier": float(np.mean((c - z) ** 2)), "ece": float(ece)}


@pytest.fixture(scope="module")
def data(shared_data: Path):
    return load(shared_data)


def test_cross_fitted_stacked_beats_majority_on_brier(data) -> None:
    batches, labels = data
    results = {name: metrics([get_method(name)(b) for b in batches], labels) for name in VOTING}
    stacked = cross_fit_predict("stacked", batches, labels, n_folds=5, seed=0)
    results["stacked (5-fold cross-fit)"] = metrics(stacked, labels)
    for recal in ("isotonic", "platt"):
        out = cross_fit_predict(f"majority+{recal}", batches, labels, n_folds=5, seed=0)
        results[f"majority+{recal} (cross-fit)"] = metrics(out, labels)
    for name, m in results.items():
        print(f"{name:34s} acc {m['acc']:.4f}  brier {m['brier']:.4f}  ece {m['ece']:.4f}")
    assert results["stacked (5-fold cross-fit)"]["brier"] < results["majority"]["brier"]
    assert results["stacked (5-fold cross-fit)"]["ece"] < results["majority"]["ece"]
