"""TH-Score: Table 3 of "Overconfidence in LLM-as-a-Judge", hand-computed cases, interval edges."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from judgefuse.calibration import THScore, th_score, th_score_from_parts

SEED_002 = Path(__file__).resolve().parents[3] / "shared" / "seeds" / "002_f59cf3f873533d39.txt"
N_JUDGEBENCH = 350
EPS = (0.05, 0.10, 0.15)

# Table 3 of "Overconfidence in LLM-as-a-Judge" (SC setting): per eps the interval accuracy, percentage of N, TH-Score.
# Copied here so the test also documents the numbers; test_table_matches_seed_text checks
# the copy against the seed file itself.
TABLE_3 = {
    "DeepSeek-R1-0528": [(1.0000, 3.71, 12.14), (0.9075, 64.86, 17.52), (0.8672, 77.43, 18.38)],
    "GPT-4.1": [(1.0000, 1.14, 0.37), (0.8346, 38.00, 7.55), (0.6923, 74.29, 7.88)],
    "GPT-4.1-mini": [(0.0000, 0.00, 0.00), (0.8333, 13.71, 2.71), (0.6250, 68.57, 4.57)],
    "Qwen3-235B-A22B": [(0.8846, 7.43, 1.93), (0.8773, 62.86, 14.59), (0.8376, 77.43, 15.73)],
    "GPT-4o": [(0.0000, 0.00, 0.00), (0.7067, 21.43, 2.46), (0.5375, 72.29, 1.38)],
    "DeepSeek-V3-0324": [(1.0000, 0.57, 0.19), (0.7879, 9.43, 1.57), (0.6516, 44.29, 3.63)],
    "R1-Distill-Llama": [(0.8605, 24.57, 5.42), (0.7101, 59.14, 7.01), (0.6514, 81.14, 6.72)],
    "Llama-3.3-70B": [(0.5195, 22.00, 0.22), (0.5364, 43.14, 0.80), (0.4846, 74.29, -0.57)],
    "GPT-4.1-nano": [(0.0000, 0.00, 0.00), (0.4286, 2.00, -0.07), (0.4583, 6.86, -0.14)],
    "Mistral-Nemo": [(0.3556, 12.86, -0.86), (0.1961, 88.86, -11.64), (0.2048, 94.86, -12.12)],
}
CONSISTENT = [
    "GPT-4.1", "GPT-4.1-mini", "GPT-4o", "DeepSeek-V3-0324", "Llama-3.3-70B", "GPT-4.1-nano",
    "Mistral-Nemo",
]
# Their printed TH does not follow from their own Acc/Percentage columns (see the report).
INCONSISTENT = ["DeepSeek-R1-0528", "Qwen3-235B-A22B", "R1-Distill-Llama"]

CASES = [(name, j) for name in CONSISTENT for j in range(3)]


def test_table_matches_seed_text() -> None:
    if not SEED_002.is_file():
        pytest.skip(f"seed not found at {SEED_002}")
    text = SEED_002.read_text(encoding="utf-8")
    for name, cells in TABLE_3.items():
        match = re.search(rf"^{re.escape(name)}\t(.+)$", text[text.index("Model\t$\\epsilon"):], re.M)
        assert match, name
        numbers = [float(v) for v in match.group(1).split("\t")]
        assert numbers == [v for cell in cells for v in cell], name


@pytest.mark.parametrize(("name", "j"), CASES)
def test_table3_from_parts(name: str, j: int) -> None:
    acc, pct, expected = TABLE_3[name][j]
    assert th_score_from_parts(acc, pct / 100) == pytest.approx(expected, abs=0.01)


def _arrays_for(acc: float, pct: float, eps: float, n: int = N_JUDGEBENCH, seed: int = 0):
    """Confidence/correct arrays of n items with round(pct% of n) in H, round(acc * |H|) right.

    Items outside H get confidences strictly between eps and 1 - eps (so L stays empty), with
    mixed correctness that must not matter.
    """
    rng = np.random.default_rng(seed)
    n_high = round(pct / 100 * n)
    k_high = round(acc * n_high)
    conf = rng.uniform(eps + 0.01, 1 - eps - 0.01, size=n)
    correct = rng.integers(0, 2, size=n)
    conf[:n_high] = rng.uniform(1 - eps, 1.0, size=n_high)
    conf[0 : min(n_high, 1)] = 1 - eps  # exactly on the edge: must count as high
    correct[:n_high] = 0
    correct[:k_high] = 1
    perm = rng.permutation(n)
    return conf[perm], correct[perm], n_high, k_high


@pytest.mark.parametrize(("name", "j"), CASES)
def test_table3_from_arrays(name: str, j: int) -> None:
    acc, pct, expected = TABLE_3[name][j]
    eps = EPS[j]
    conf, correct, n_high, k_high = _arrays_for(acc, pct, eps)
    # the table's columns are realised by integer counts over the 350 JudgeBench pairs
    assert 100 * n_high / N_JUDGEBENCH == pytest.approx(pct, abs=0.005)
    if n_high:
        assert k_high / n_high == pytest.approx(acc, abs=0.00005)
    result = th_score(conf, correct, eps=eps)
    assert (result.n_high, result.correct_high, result.n_low) == (n_high, k_high, 0)
    # from exact counts the score rounds to the printed value
    assert round(result.score, 2) == pytest.approx(expected, abs=1e-9)
    assert result.score == pytest.approx(expected, abs=0.01)


@pytest.mark.parametrize("name", INCONSISTENT)
def test_inconsistent_rows_really_are(name: str) -> None:
    """Documented: these rows' TH cannot be recomputed from their own columns."""
    mismatches = [
        abs(th_score_from_parts(acc, pct / 100) - th) > 0.01 for acc, pct, th in TABLE_3[name]
    ]
    assert all(mismatches)


def test_hand_computed_both_intervals() -> None:
    # H (c >= 0.9): 0.9, 0.95, 1.0 with 2 right; L (c <= 0.1): 0.0, 0.1 with 0 right; N = 6
    conf = [0.9, 0.95, 1.0, 0.0, 0.1, 0.5]
    correct = [1, 1, 0, 0, 0, 1]
    r = th_score(conf, correct, eps=0.1)
    assert isinstance(r, THScore)
    assert (r.n, r.n_high, r.correct_high, r.n_low, r.correct_low) == (6, 3, 2, 2, 0)
    assert r.acc_high == pytest.approx(2 / 3)
    assert r.acc_low == 0.0
    assert r.coverage_high == 0.5 and r.coverage_low == pytest.approx(1 / 3)
    expected = 0.5 * (
        (math.exp(2 / 3 - 0.5) - 1) * 100 * 3 / 6 + (math.exp(0 - 0.5) - 1) * 100 * 2 / 6
    )
    assert r.score == pytest.approx(expected)
    assert float(r) == r.score
    assert th_score_from_parts(2 / 3, 0.5, 0.0, 1 / 3) == pytest.approx(expected)


def test_empty_intervals_add_zero() -> None:
    r = th_score([0.5, 0.6, 0.7], [1, 0, 1])
    assert r.score == 0.0
    assert math.isnan(r.acc_high) and math.isnan(r.acc_low)
    assert th_score_from_parts(0.3, 0.0, 0.9, 0.0) == 0.0


@pytest.mark.parametrize(("eps", "edge_high", "edge_low"), [(0.1, 0.9, 0.1), (0.05, 0.95, 0.05), (0.15, 0.85, 0.15)])
def test_edges_are_inclusive_with_tolerance(eps: float, edge_high: float, edge_low: float) -> None:
    r = th_score([edge_high, edge_low, 0.5], [1, 0, 1], eps=eps)
    assert (r.n_high, r.n_low) == (1, 1)
    # just outside the tolerance does not count
    r = th_score([edge_high - 1e-6, edge_low + 1e-6], [1, 0], eps=eps)
    assert (r.n_high, r.n_low) == (0, 0)


def test_all_correct_all_high_is_maximal() -> None:
    assert th_score([1.0] * 4, [1] * 4).score == pytest.approx(50 * (math.exp(0.5) - 1))
    assert th_score([1.0] * 4, [0] * 4).score == pytest.approx(50 * (math.exp(-0.5) - 1))


@pytest.mark.parametrize("eps", [-0.1, 0.5, 0.7])
def test_bad_eps(eps: float) -> None:
    with pytest.raises(ValueError, match="eps"):
        th_score([0.5], [1], eps=eps)


def test_bad_parts() -> None:
    with pytest.raises(ValueError, match="coverage_high"):
        th_score_from_parts(0.5, 38.0)  # a percentage, not a fraction
