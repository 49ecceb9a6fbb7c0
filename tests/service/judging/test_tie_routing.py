"""A fused exact tie goes to human review with its reason, even under a threshold at or below 0.5
(docs/design.md, 'Fusion'): the votes prefer neither answer, so nothing may auto-accept it."""

from __future__ import annotations

import time

import pytest

from judgefuse.fusion import get_method
from judgefuse.judges.types import JudgeVote
from judgefuse.service.judging.routing import route_verdict
from judgefuse.service.storage import ThresholdRecord

METHODS = ("majority", "confidence_weighted", "sqrt_confidence_weighted", "entropy_weighted", "mean_probability")


def vote(judge: str, choice: str) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice=choice, confidence=0.8, p_a=0.8 if choice == "A" else 0.2)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.9])
def test_exact_tie_is_routed_to_review(method: str, threshold: float) -> None:
    verdict = get_method(method)([vote("j1", "A"), vote("j2", "B")])
    assert verdict.choice is None and verdict.confidence == 0.5
    record = ThresholdRecord(panel="p", threshold=threshold, version=1, created_at=time.time(), method=method)
    route, used = route_verdict(verdict, record, panel="p")
    assert route == "human_review"
    assert used.code == "undecided" and used.reason == "exact tie: neither answer preferred"


def test_a_decided_verdict_still_auto_accepts() -> None:
    verdict = get_method("majority")([vote("j1", "A"), vote("j2", "A")])
    record = ThresholdRecord(panel="p", threshold=0.9, version=1, created_at=time.time(), method="majority")
    assert route_verdict(verdict, record, panel="p")[0] == "auto_accept"
