"""A verdict's response body, built from the engine's objects (docs/design.md, 'Serving').

The wire models in :mod:`judgefuse.service.schemas` are plain: the client reads them and needs
nothing of the engine. Building them from a :class:`~judgefuse.fusion.verdict.Verdict`, its
votes and a cascade's walk is done here, below the slices that answer with a verdict (judging
for a new one, review for a stored one)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Literal

from judgefuse.fusion.cascade import CascadeDecision, vote_calls
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.schemas import (
    CascadeOut,
    CostOut,
    FailedJudge,
    LabelResult,
    ReviewOut,
    ThresholdUsed,
    VerdictOut,
    VoteOut,
)
from judgefuse.service.storage.records import LabelKind

__all__ = ["cascade_out", "cascade_out_of_stored", "cost_of_votes", "verdict_out", "vote_out"]

_CASCADE_VERSION = re.compile(r"^cascade:(\d+)/(\d+):(.*)$")
"""A cascade verdict's ``model_version``: ``cascade:<stage>/<stages>:<stage name>``."""


def vote_out(vote: JudgeVote) -> VoteOut:
    """The vote as returned. Its fields are read by pydantic's validator (every field there is
    a field of the already valid vote, with the same or a wider type): 3.0 us a vote, where
    ``model_construct``, which loops over the fields in Python, took 5.4."""
    return VoteOut.model_validate(vote, from_attributes=True)


def cost_of_votes(votes: Iterable[JudgeVote]) -> CostOut:
    """What the judges' calls behind ``votes`` cost (calls, tokens, USD)."""
    votes = list(votes)
    return CostOut.model_construct(
        calls=sum(vote_calls(v) for v in votes),
        prompt_tokens=sum(v.prompt_tokens for v in votes),
        completion_tokens=sum(v.completion_tokens for v in votes),
        usd=math.fsum(v.cost_usd for v in votes),
    )


def cascade_out(decision: CascadeDecision, *, stages: int, names: list[str],
                fallback: Literal["review", "panel"]) -> CascadeOut:
    """Where a live cascade walk decided (``stage`` 1-based)."""
    stage = decision.stage
    return CascadeOut.model_construct(
        stage=None if stage is None else stage + 1,
        name=None if stage is None else names[stage], accepted=stage is not None,
        stages=stages, stages_consulted=decision.stages_consulted, fallback=fallback,
        stage_threshold=decision.verdict.threshold,
    )


def cascade_out_of_stored(verdict: Verdict, *, fallback: Literal["review", "panel"] | None = None,
                       stages: int | None = None) -> CascadeOut | None:
    """Rebuilt from a stored cascade verdict (its ``model_version`` and notes); ``fallback``
    and ``stages`` from the panel's current cascade when the caller knows it. None for a
    verdict no cascade made."""
    if verdict.method != "cascade":
        return None
    consulted = sum(1 for note in verdict.notes if note.startswith("cascade: stage "))
    match = _CASCADE_VERSION.match(verdict.model_version or "")
    stage = name = None
    if match is not None:
        stage, name = int(match.group(1)), match.group(3)
        stages = int(match.group(2))
    return CascadeOut.model_construct(
        stage=stage, name=name, accepted=stage is not None,
        stages=stages if stages is not None else consulted, stages_consulted=consulted,
        fallback=fallback or "review", stage_threshold=verdict.threshold if stage else None,
    )


def verdict_out(
    verdict: Verdict, *, panel: str, threshold: ThresholdUsed, created_at: float,
    label: LabelKind | None = None, labelled_at: float | None = None,
    feedback: LabelResult | None = None, category: str | None = None,
    cascade: CascadeOut | None = None, review: ReviewOut | None = None,
) -> VerdictOut:
    """The verdict's response body (``POST /v1/judge``, ``/v1/fuse``, ``GET /v1/verdicts/{id}``)."""
    return VerdictOut.model_construct(
        id=verdict.id or "", panel=panel, choice=verdict.choice,
        confidence=verdict.confidence, p_a=verdict.p_a,
        route=verdict.route or "human_review", threshold=threshold, method=verdict.method,
        model_version=verdict.model_version, degraded=verdict.degraded,
        failed_judges=[
            FailedJudge.model_construct(judge=v.judge, reason=v.error or "no usable vote")
            for v in verdict.votes if v.failed
        ],
        votes=[vote_out(v) for v in verdict.votes], n_valid=verdict.n_valid,
        n_invalid=verdict.n_invalid, tie_broken=verdict.tie_broken, notes=verdict.notes,
        timings=verdict.timings, created_at=created_at, label=label,
        labelled_at=labelled_at, feedback=feedback, category=category,
        cost=cost_of_votes(verdict.votes),
        cascade=cascade, review=review,
    )
