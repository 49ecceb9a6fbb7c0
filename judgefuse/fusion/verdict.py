"""The verdict type: what fusing a panel's votes produces (``fusion`` owns it, docs/design.md, 'Architecture')."""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judgefuse.judges.types import JudgeVote, Letter

Route = Literal["auto_accept", "human_review"]

TIE_NOTE = "exact tie: neither answer preferred (position-neutral rule), confidence 0.5"
"""The note of a verdict whose method found the two answers exactly equal (docs/design.md,
'Fusion'): no choice, confidence and ``p_a`` 0.5, so the service routes it to review and the
offline scoring counts it as a tie (:func:`is_tie`), never as a win for the answer shown first."""


class Verdict(BaseModel):
    """A fused decision over one item.

    ``confidence`` is the confidence in ``choice`` (in [0, 1]); ``p_a`` the probability that A
    is better. ``choice`` is ``None`` when no vote was usable and the method could not decide,
    or when the votes tie exactly (:data:`TIE_NOTE`); then ``confidence`` is 0.5 and the verdict
    must go to review.
    """

    model_config = ConfigDict(extra="forbid")

    choice: Letter | None
    confidence: float = Field(ge=0.0, le=1.0)
    p_a: float = Field(ge=0.0, le=1.0)
    method: str
    votes: list[JudgeVote] = Field(default_factory=list)
    n_valid: int = Field(default=0, ge=0)
    n_invalid: int = Field(default=0, ge=0)
    tie_broken: bool = False
    """True when the method's scores tied and its documented tie rule decided."""
    explanation: str = ""
    notes: list[str] = Field(default_factory=list)
    model_version: str | None = None
    route: Route | None = None
    threshold: float | None = None
    id: str | None = None
    degraded: bool = False
    timings: dict[str, float] = Field(default_factory=dict)

    @field_validator("confidence", "p_a")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("must be a finite number in [0, 1]")
        return value


def is_tie(verdict: Verdict) -> bool:
    """True for a fused exact tie (valid votes, no answer preferred), not a verdict without votes."""
    return verdict.choice is None and TIE_NOTE in verdict.notes
