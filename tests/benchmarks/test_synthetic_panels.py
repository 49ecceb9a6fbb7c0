"""``benchmarks/synthetic_panels.py``: each regime has the structure its name promises, and its
file is a votes file ``judgefuse eval`` reads."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import synthetic_panels as S  # noqa: E402

from judgefuse.evaluation.loaders import read_votes  # noqa: E402

N = 4000


def _accuracy(items, judge: str) -> float:
    return float(np.mean([next(v for v in j.votes if v.judge == judge).choice == j.item.label for j in items]))


def _confidence_gap(items, judge: str) -> float:
    """Mean confidence when right minus when wrong."""
    right, wrong = [], []
    for judged in items:
        vote = next(v for v in judged.votes if v.judge == judge)
        (right if vote.choice == judged.item.label else wrong).append(vote.confidence)
    return float(np.mean(right) - np.mean(wrong))


def test_accuracies_and_confidence_per_regime() -> None:
    uninformative = S.panel("uninformative", N)
    for k, accuracy in enumerate(S.ACCURACIES):
        assert _accuracy(uninformative, f"j{k + 1}") == pytest.approx(accuracy, abs=0.025)
    assert abs(_confidence_gap(uninformative, "j5")) < 0.02
    informative = S.panel("informative", N)
    assert _accuracy(informative, "j1") == pytest.approx(0.60, abs=0.025)
    assert _confidence_gap(informative, "j5") > 0.04
    correlated = S.panel("correlated", N)
    assert all(j.votes[4].choice == j.votes[5].choice and j.votes[5].judge == "j5_copy" for j in correlated)
    assert _accuracy(S.panel("corrupted", N), "j5") == pytest.approx(0.75 * 0.7 + 0.25 * 0.3, abs=0.025)
    biased = S.panel("position_biased", N)
    assert np.mean([j.votes[4].choice == "A" for j in biased]) == pytest.approx(0.5 + 0.5 * 0.5, abs=0.025)
    assert _accuracy(S.panel("strong", N), "j1") == pytest.approx(0.90, abs=0.02)
    assert np.mean([j.item.label == "A" for j in uninformative]) == pytest.approx(0.5, abs=0.03)


def test_a_written_panel_reads_back_and_is_deterministic(tmp_path: Path) -> None:
    path = tmp_path / "panel.jsonl"
    S.write(path, S.panel("strong", 50, seed=3))
    assert read_votes(path) == S.panel("strong", 50, seed=3)
    assert S.panel("strong", 50, seed=4) != S.panel("strong", 50, seed=3)


def test_the_ties_panel_has_tie_labels_and_tie_votes_and_leaves_the_regimes_alone() -> None:
    ties = S.panel(S.TIE_PANEL, N)
    outcomes = [j.item.outcome for j in ties]
    assert outcomes.count("tie") / N == pytest.approx(S.TIE_SHARE, abs=0.02)
    on_tie = [v.tie for j in ties if j.item.outcome == "tie" for v in j.votes]
    on_letter = [v.tie for j in ties if j.item.outcome != "tie" for v in j.votes]
    assert np.mean(on_tie) == pytest.approx(0.4, abs=0.03) and np.mean(on_letter) == pytest.approx(0.05, abs=0.01)
    assert S.TIE_PANEL not in S.REGIMES  # each regime's random stream is numbered by the regimes' sorted names


def test_ece_floor_of_an_exactly_calibrated_row() -> None:
    """One bin of 1,000 items at 0.8: E|X/n - 0.8| for X ~ Binomial(1000, 0.8), about sqrt(2/pi * 0.16/1000)."""
    row = {"reliability": [{"count": 1000, "mean_confidence": 0.8}, {"count": 0, "mean_confidence": None}]}
    assert S.ece_floor(row) == pytest.approx(np.sqrt(2 / np.pi * 0.16 / 1000), rel=0.03)


def test_heldout_cell_scores_each_method_on_an_independent_test_panel(tmp_path: Path) -> None:
    """Fitted on 300 items, scored on 2,000 others (each row's arrays checked against its own
    ``predict`` on the first test items inside ``heldout_cell``); the table reads the cells back."""
    cell = S.heldout_cell("strong", 300, 0, test_n=2000)
    assert set(cell["rows"]) == set(S.METHODS) and cell["auto_chose"]
    for row in cell["rows"].values():
        assert 0.5 < row["accuracy"] <= 1.0 and 0.0 <= row["floor"] < 0.05
        assert sum(b["count"] for b in row["reliability"]) == 2000
    assert cell["rows"]["dawid_skene"]["accuracy"] > cell["rows"]["majority"]["accuracy"]  # the strong judge
    (tmp_path / "heldout_strong_300_s0.json").write_text(json.dumps(cell))
    table = S.heldout_table(tmp_path)
    assert "| strong | 300 |" in table and cell["auto_chose"] in table
