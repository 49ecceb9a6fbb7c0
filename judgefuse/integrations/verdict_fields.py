"""What every integration reports of a verdict, written once: the fields a framework's score
carries in its metadata and the sentence it shows as the explanation."""

from __future__ import annotations

from typing import Any

from judgefuse.client.models import VerdictOut

__all__ = ["explanation", "verdict_metadata", "win_probability"]


def win_probability(verdict: VerdictOut, *, candidate: str = "A") -> float:
    """The fused probability that the candidate (in position ``candidate``) is the better
    answer: ``p_a`` for A, ``1 - p_a`` for B."""
    return verdict.p_a if candidate == "A" else 1.0 - verdict.p_a


def verdict_metadata(verdict: VerdictOut) -> dict[str, Any]:
    """The verdict, its calibrated confidence, the route and each judge's vote: plain JSON
    values, as score metadata must be."""
    return {
        "verdict_id": verdict.id,
        "panel": verdict.panel,
        "choice": verdict.choice,
        "confidence": verdict.confidence,
        "p_a": verdict.p_a,
        "route": verdict.route,
        "method": verdict.method,
        "degraded": verdict.degraded,
        "votes": [
            {"judge": v.judge, "mode": v.mode, "choice": v.choice, "confidence": v.confidence,
             "p_a": v.p_a, "error": v.error}
            for v in verdict.votes
        ],
        "cost_usd": verdict.cost.usd,
    }


def explanation(verdict: VerdictOut, names: tuple[str, str] = ("A", "B")) -> str:
    """One sentence: who won, how sure, how the judges split, where the verdict was routed."""
    valid = [v for v in verdict.votes if v.choice is not None]
    split = ", ".join(f"{v.judge}: {names[0] if v.choice == 'A' else names[1]}" for v in valid)
    winner = "no winner" if verdict.choice is None else (names[0] if verdict.choice == "A" else names[1])
    return (f"judgefuse ({verdict.panel}, {verdict.method}): {winner} with confidence "
            f"{verdict.confidence:.2f}; votes {split or 'none valid'}; route {verdict.route}")
