"""Hand-computed cases and invariances of the voting baselines."""

from __future__ import annotations

import math

import numpy as np
import pytest

from judgefuse.fusion import (
    binary_entropy,
    confidence_weighted,
    entropy_weighted,
    get_method,
    majority,
    mean_probability,
    sqrt_confidence_weighted,
)
from judgefuse.fusion.verdict import TIE_NOTE, is_tie
from judgefuse.judges.types import JudgeVote, other

VOTING = [majority, confidence_weighted, sqrt_confidence_weighted, entropy_weighted, mean_probability]


def vote(judge: str, choice: str | None, confidence: float | None = None, **kw) -> JudgeVote:
    if choice is None:
        return JudgeVote.invalid(judge, "sc", kw.pop("error", "parse error"), **kw)
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=confidence, **kw)


def swap(v: JudgeVote) -> JudgeVote:
    return v.model_copy(
        update={
            "choice": other(v.choice) if v.choice else None,
            "p_a": None if v.p_a is None else 1.0 - v.p_a,
        }
    )


ABB = [vote("j1", "A", 0.9), vote("j2", "B", 0.6), vote("j3", "B", 0.7)]


def test_binary_entropy() -> None:
    assert binary_entropy(0.5) == pytest.approx(1.0)
    assert binary_entropy(0.0) == 0.0 and binary_entropy(1.0) == 0.0
    assert binary_entropy(0.9) == pytest.approx(0.4689955935892812)


def test_majority_hand_computed() -> None:
    v = majority(ABB)
    assert (v.choice, v.confidence, v.p_a) == ("B", pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (v.n_valid, v.n_invalid, v.tie_broken, v.method) == (3, 0, False, "majority")
    assert v.votes == ABB


def test_majority_tie_broken_by_highest_confidence() -> None:
    v = majority([vote("j1", "A", 0.6), vote("j2", "B", 0.9)])
    assert v.choice == "B" and v.confidence == 0.5 and v.p_a == 0.5 and v.tie_broken
    assert "highest single confidence" in v.notes[0]


def test_majority_tie_surviving_is_an_exact_tie() -> None:
    """Position-neutral: equal votes prefer neither answer (confidence 0.5, no choice), whichever
    order the answers were shown in, never A by default."""
    for votes in ([vote("j1", "A", 0.8), vote("j2", "B", 0.8)], [vote("j1", "B", 0.8), vote("j2", "A", 0.8)]):
        for fn in (majority, confidence_weighted, sqrt_confidence_weighted, entropy_weighted, mean_probability):
            v = fn(votes)
            assert (v.choice, v.confidence, v.p_a, v.tie_broken) == (None, 0.5, 0.5, False), fn
            assert is_tie(v) and v.notes[0] == TIE_NOTE and (v.n_valid, v.n_invalid) == (2, 0)


def test_no_valid_vote_is_not_a_tie() -> None:
    assert not is_tie(majority([JudgeVote.invalid("j1", "sc", "unreadable")]))


def test_confidence_weighted_hand_computed() -> None:
    v = confidence_weighted(ABB)
    assert v.choice == "B" and v.confidence == pytest.approx(1.3 / 2.2)
    assert v.p_a == pytest.approx(1 - 1.3 / 2.2)


def test_confidence_weighted_tie_uses_max_confidence() -> None:
    # scores: A 0.6, B 0.3 + 0.3 = 0.6 -> tie; A has the highest single confidence
    v = confidence_weighted([vote("j1", "B", 0.3), vote("j2", "A", 0.6), vote("j3", "B", 0.3)])
    assert v.choice == "A" and v.tie_broken and v.confidence == pytest.approx(0.5)


def test_sqrt_confidence_weighted_hand_computed() -> None:
    votes = [vote("j1", "A", 0.81), vote("j2", "B", 0.36), vote("j3", "B", 0.49)]
    v = sqrt_confidence_weighted(votes)
    assert v.choice == "B" and v.confidence == pytest.approx(1.3 / 2.2)
    # without the square root: A 0.81 vs B 0.85
    assert confidence_weighted(votes).confidence == pytest.approx(0.85 / 1.66)


def test_entropy_weighted_hand_computed() -> None:
    h9, h6 = 0.4689955935892812, 0.9709505944546686
    s_a, s_b = 0.9 / (h9 + 1e-6), 0.6 / (h6 + 1e-6)
    v = entropy_weighted([vote("j1", "A", 0.9), vote("j2", "B", 0.6)])
    assert v.choice == "A" and v.confidence == pytest.approx(s_a / (s_a + s_b))
    assert v.confidence == pytest.approx(0.75642, abs=1e-5)


def test_entropy_weighted_certain_vote_dominates() -> None:
    v = entropy_weighted([vote("j1", "A", 1.0), vote("j2", "B", 0.9), vote("j3", "B", 0.9)])
    assert v.choice == "A" and v.confidence > 0.99


def test_entropy_weighted_can_overturn_majority() -> None:
    votes = [vote("j1", "A", 0.99), vote("j2", "B", 0.55), vote("j3", "B", 0.55)]
    assert majority(votes).choice == "B"
    assert entropy_weighted(votes).choice == "A"


def test_mean_probability_hand_computed() -> None:
    v = mean_probability([vote("j1", "A", 0.9), vote("j2", "B", 0.6), vote("j3", "A", 0.5)])
    # p_a: 0.9, 0.4, 0.5 -> 0.6
    assert v.choice == "A" and v.confidence == pytest.approx(0.6) and v.p_a == pytest.approx(0.6)


def test_mean_probability_uses_abstaining_p_a_and_ties() -> None:
    abstain = JudgeVote.invalid("j3", "recorded", "games disagree", p_a=0.2)
    v = mean_probability([vote("j1", "A", 0.9), vote("j2", "B", 0.6), abstain])
    # (0.9 + 0.4 + 0.2) / 3 = 0.5 -> an exact tie
    assert v.choice is None and is_tie(v) and v.confidence == pytest.approx(0.5)
    assert v.n_valid == 2 and v.n_invalid == 1
    assert any("abstaining" in n for n in v.notes)
    v = mean_probability([abstain])
    assert v.choice == "B" and v.confidence == pytest.approx(0.8) and v.n_valid == 0


@pytest.mark.parametrize("fn", VOTING)
def test_single_vote(fn) -> None:
    v = fn([vote("j1", "B", 0.7)])
    assert v.choice == "B" and (v.n_valid, v.n_invalid) == (1, 0)
    expected = 0.7  # one valid vote carries its own confidence under every method
    assert v.confidence == pytest.approx(expected) and v.p_a == pytest.approx(1 - expected)


@pytest.mark.parametrize("fn", VOTING)
@pytest.mark.parametrize("votes", [[], [vote("j1", None), vote("j2", None, error="tie")]])
def test_no_valid_vote(fn, votes) -> None:
    v = fn(votes)
    assert v.choice is None and v.confidence == 0.5 and v.p_a == 0.5
    assert v.n_valid == 0 and v.n_invalid == len(votes) and v.notes


@pytest.mark.parametrize("fn", VOTING)
def test_mixed_invalid_are_counted_and_ignored(fn) -> None:
    votes = [*ABB, vote("j4", None), vote("j5", None, error="timeout")]
    v, ref = fn(votes), fn(ABB)
    assert (v.n_valid, v.n_invalid) == (3, 2)
    assert v.choice == ref.choice and v.confidence == pytest.approx(ref.confidence)
    assert len(v.votes) == 5


def random_votes(rng: np.random.Generator, n: int) -> list[JudgeVote]:
    out = []
    for j in range(n):
        r = rng.random()
        if r < 0.15:
            out.append(vote(f"j{j}", None))
        else:
            out.append(vote(f"j{j}", "A" if rng.random() < 0.5 else "B", float(rng.uniform(0.3, 1.0))))
    return out


@pytest.mark.parametrize("fn", VOTING)
def test_swap_and_permutation_invariance(fn) -> None:
    rng = np.random.default_rng(7)
    for trial in range(300):
        votes = random_votes(rng, int(rng.integers(1, 7)))
        if trial % 5 == 0 and len(votes) >= 2:  # force count ties now and then
            votes = votes[:2]
        base = fn(votes)
        perm = fn([votes[i] for i in rng.permutation(len(votes))])
        assert perm.choice == base.choice
        assert perm.confidence == pytest.approx(base.confidence, abs=1e-12)
        assert perm.tie_broken == base.tie_broken
        swapped = fn([swap(v) for v in votes])
        if base.choice is None:
            assert swapped.choice is None
        else:
            assert swapped.choice == other(base.choice)
        assert swapped.confidence == pytest.approx(base.confidence, abs=1e-12)
        assert swapped.p_a == pytest.approx(1.0 - base.p_a, abs=1e-12)


@pytest.mark.parametrize(
    "name", ["majority", "confidence_weighted", "sqrt_confidence_weighted", "entropy_weighted", "mean_probability"]
)
def test_registered_methods_match_functions(name) -> None:
    method = get_method(name)
    assert method.name == name and not method.requires_fit
    v = method(ABB)
    assert v.method == name
    assert math.isclose(v.p_a, 1 - v.confidence if v.choice == "B" else v.confidence)
