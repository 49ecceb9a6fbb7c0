"""A judge's tie vote ("A=B") is a vote with p_a 0.5 in every voting rule; learned fusion
takes it without crashing (docs/design.md, 'Fusion')."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from judgefuse.fusion import (
    confidence_weighted,
    entropy_weighted,
    majority,
    mean_probability,
    sqrt_confidence_weighted,
)
from judgefuse.fusion.dawid_skene import DawidSkeneFusion
from judgefuse.fusion.stacking import StackedFusion
from judgefuse.fusion.verdict import is_tie
from judgefuse.fusion.voting import ENTROPY_EPS
from judgefuse.judges.types import JudgeVote

VOTING = [majority, confidence_weighted, sqrt_confidence_weighted, entropy_weighted, mean_probability]


def vote(judge: str, choice: str, confidence: float = 0.8) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=confidence)


def tie(judge: str) -> JudgeVote:
    return JudgeVote.tied(judge, "sc")


def test_a_tie_vote_is_read_from_a_votes_line_and_checked() -> None:
    read = JudgeVote.model_validate({"judge": "j", "mode": "recorded", "choice": "tie"})
    assert (read.tie, read.choice, read.p_a, read.outcome, read.valid) == (True, None, 0.5, "tie", False)
    assert JudgeVote.model_validate_json(read.model_dump_json()) == read
    with pytest.raises(ValidationError, match="p_a 0.5"):
        JudgeVote(judge="j", mode="sc", tie=True, p_a=0.7)
    with pytest.raises(ValidationError, match="no choice"):
        JudgeVote(judge="j", mode="sc", tie=True, choice="A", confidence=0.9)


def test_majority_gives_half_a_vote_to_each_answer() -> None:
    verdict = majority([vote("a", "A"), vote("b", "A"), tie("c")])
    assert verdict.choice == "A"
    assert verdict.confidence == pytest.approx(2.5 / 3.0)  # abstention would say 1.0
    assert (verdict.n_valid, verdict.n_invalid) == (2, 0)
    assert "1 tie vote(s) counted as p_a 0.5" in verdict.notes


def test_weighted_rules_split_the_tie_weight() -> None:
    votes = [vote("a", "A", 0.9), vote("b", "B", 0.6), tie("c")]
    # confidence_weighted: A = 0.9 + 0.25, B = 0.6 + 0.25
    assert confidence_weighted(votes).confidence == pytest.approx(1.15 / 2.0)
    # sqrt: each side gets sqrt(0.5) / 2
    half = math.sqrt(0.5) / 2
    assert sqrt_confidence_weighted(votes).confidence == pytest.approx(
        (math.sqrt(0.9) + half) / (math.sqrt(0.9) + math.sqrt(0.6) + 2 * half)
    )
    # entropy: w(0.5) = 0.5 / (1 + eps), half to each side
    h = (0.5 / (1.0 + ENTROPY_EPS)) / 2
    h9 = -(0.9 * math.log2(0.9) + 0.1 * math.log2(0.1))
    h6 = -(0.6 * math.log2(0.6) + 0.4 * math.log2(0.4))
    a, b = 0.9 / (h9 + ENTROPY_EPS) + h, 0.6 / (h6 + ENTROPY_EPS) + h
    assert entropy_weighted(votes).confidence == pytest.approx(a / (a + b))
    # mean_probability averages the tie's 0.5 in
    assert mean_probability(votes).p_a == pytest.approx((0.9 + 0.4 + 0.5) / 3)


@pytest.mark.parametrize("rule", VOTING)
def test_one_letter_beside_a_tie_is_not_the_one_valid_vote_rule(rule) -> None:
    verdict = rule([vote("a", "A", 0.8), tie("b")])
    agreeing = rule([vote("a", "A", 0.8), vote("b", "A", 0.8)])
    assert verdict.choice == "A"
    assert 0.5 < verdict.confidence < agreeing.confidence  # the tie pulled it toward 0.5


@pytest.mark.parametrize("rule", VOTING)
def test_all_ties_are_an_exact_tie(rule) -> None:
    verdict = rule([tie("a"), tie("b")])
    assert is_tie(verdict) and verdict.confidence == 0.5


@pytest.mark.parametrize("rule", VOTING)
def test_a_tie_vote_never_changes_the_winner(rule) -> None:
    votes = [vote("a", "B", 0.7), vote("b", "B", 0.6), vote("c", "A", 0.9)]
    assert rule([*votes, tie("d")]).choice == rule(votes).choice


def _panel_with_ties(n: int, seed: int) -> tuple[list[list[JudgeVote]], list[str]]:
    rng = np.random.default_rng(seed)
    truths = ["A" if x < 0.5 else "B" for x in rng.random(n)]
    batches = []
    for truth in truths:
        batch = []
        for judge, right in (("good", 0.85), ("fair", 0.7), ("tier", 0.7)):
            if judge == "tier" and rng.random() < 0.3:
                batch.append(tie(judge))
                continue
            letter = truth if rng.random() < right else ("B" if truth == "A" else "A")
            batch.append(vote(judge, letter, 0.8))
        batches.append(batch)
    batches.append([tie("good"), tie("fair"), tie("tier")])
    truths.append("A")
    return batches, truths


def test_dawid_skene_and_stacking_take_tie_votes() -> None:
    batches, labels = _panel_with_ties(200, seed=3)
    ds = DawidSkeneFusion().fit_unlabelled(batches)
    verdicts = ds.predict(batches)
    assert is_tie(verdicts[-1])  # all ties: no observation, an exact tie
    assert sum(v.choice == label for v, label in zip(verdicts, labels, strict=True)) > 0.75 * len(labels)
    stacked = StackedFusion().fit(batches, labels)
    predicted = stacked.predict(batches)
    assert all(0.0 <= v.p_a <= 1.0 for v in predicted)
    assert sum(v.choice == label for v, label in zip(predicted, labels, strict=True)) > 0.75 * len(labels)


def test_p_a_exactly_half_is_a_tie_vote_counted_like_one() -> None:
    """``from_p_a(0.5)`` (a logprob judge with equal letter probabilities, a posted ``p_a`` 0.5) is
    the same vote as ``tied``: majority pulls toward 0.5 rather than dropping it as an abstention."""
    half = JudgeVote.from_p_a("c", "logprob", 0.5, raw="text")
    assert (half.tie, half.choice, half.confidence, half.p_a, half.error, half.outcome) == (
        True, None, None, 0.5, None, "tie")
    assert half.raw == "text"
    fused = majority([vote("a", "A"), vote("b", "A"), half])
    assert fused.confidence == pytest.approx(2.5 / 3.0)
    assert fused.confidence == majority([vote("a", "A"), vote("b", "A"), tie("c")]).confidence
    assert JudgeVote.from_p_a("c", "logprob", 0.5000001).choice == "A"
