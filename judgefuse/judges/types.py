"""The data model every room shares: the pairwise item, one judge's vote, and a judged item.

``judges`` owns these types (docs/design.md, 'Architecture'): fusion reads votes, evaluation reads judged items,
the service stores both. They are pydantic models so that a malformed record is refused
with the field that was wrong, wherever it comes from (a JSONL file, an HTTP body, Redis).

Conventions
-----------
* ``choice`` is the letter the judge picked, or ``None`` when the vote names no letter
  (the judge abstained, called a tie, failed, or said something unparseable). Such a vote
  is kept, never dropped: fusion counts it and evaluation scores it as not correct.
* ``tie`` marks a vote that said the two answers are equally good (JudgeBench's ``A=B``). It has
  no ``choice``, no ``error`` and ``p_a`` 0.5; a votes file may write it as ``"choice": "tie"``.
  Voting counts it as a vote with ``p_a`` 0.5 (docs/design.md, 'Fusion'); :attr:`JudgeVote.outcome`
  reads ``"tie"``.
* An item's ``label`` is the better letter. A label saying neither is better is kept in
  ``tie_label`` (``tie`` or ``both_bad``; ``label`` is then ``None``, so every A/B metric and
  learner leaves the item out); input may write it as ``"label": "tie"`` / ``"both_bad"``.
* ``confidence`` is the judge's confidence *in its own choice*, in [0, 1]. It may be below
  0.5 (a judge may say "A, 30% sure"); it is ``None`` when ``choice`` is ``None``.
* ``p_a`` is the probability that A is the better answer. For a valid vote it defaults to
  ``confidence`` for A and ``1 - confidence`` for B. It may be set on an abstaining vote when
  the source still carries a signal (two games that disagree but whose reward margins do not
  cancel): learned fusion can use it, voting ignores it.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Letter = Literal["A", "B"]
"""An answer of a pair. A label that names one is *decided*: it says which answer is better."""
LETTERS: tuple[Letter, ...] = get_args(Letter)
"""The two answers, in order; also the decided label kinds (accuracy, calibration, tuning, refits)."""
Outcome = Literal["A", "B", "tie"]
"""What a judge can answer on a pair: a letter or a tie."""
TieLabel = Literal["tie", "both_bad"]
"""A label saying neither answer is the better one: equally good, or both unacceptable."""
TIE_LABELS: tuple[TieLabel, ...] = get_args(TieLabel)
"""The *undecided* label kinds: stored and counted as such, apart from every A/B count."""
LabelKind = Literal[Letter, TieLabel]
"""Every label an item or a verdict can carry (docs/design.md, 'The review loop'): ``A`` or ``B``
(decided, :data:`LETTERS`), ``tie`` (equally good) or ``both_bad`` (neither acceptable)
(undecided, :data:`TIE_LABELS`). The one definition: every other module imports these."""
LABEL_KINDS: tuple[LabelKind, ...] = get_args(LabelKind)
"""``("A", "B", "tie", "both_bad")``, in that order (the review page's buttons, messages)."""


def spelled(kinds: tuple[str, ...], *, quote: bool = False) -> str:
    """``kinds`` as a message writes them: ``A, B, tie or both_bad`` (quoted with ``quote``)."""
    words = [repr(kind) if quote else kind for kind in kinds]
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)
Mode = Literal["sc", "mp", "logprob", "recorded"]
"""How the confidence was elicited: the three modes of "Overconfidence in LLM-as-a-Judge", or ``recorded`` for a replayed
judgment whose confidence comes from the source's own documented rule."""


def other(letter: Letter) -> Letter:
    """The other answer's letter."""
    return "B" if letter == "A" else "A"


class PairwiseItem(BaseModel):
    """A pairwise question: which of two candidate answers to ``question`` is better."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    question: str = ""
    answer_a: str = ""
    answer_b: str = ""
    label: Letter | None = None
    tie_label: TieLabel | None = None
    """``tie`` / ``both_bad`` when the label says neither answer is better (``label`` is then None)."""
    category: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _label_kinds(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("label") in TIE_LABELS:
            if data.get("tie_label") not in (None, data["label"]):
                raise ValueError(f"label {data['label']!r} contradicts tie_label {data['tie_label']!r}")
            data = {**data, "tie_label": data["label"], "label": None}
        return data

    @model_validator(mode="after")
    def _one_label(self) -> PairwiseItem:
        if self.label is not None and self.tie_label is not None:
            raise ValueError(f"label {self.label!r} and tie_label {self.tie_label!r}: give one")
        return self

    @property
    def outcome(self) -> Letter | TieLabel | None:
        """The label as the source says it: ``A``, ``B``, ``tie``, ``both_bad`` or None (unlabelled)."""
        return self.label if self.label is not None else self.tie_label


MAX_CALLS = 2**31 - 1
"""The most model calls one vote may record. Votes files are read into int64 arrays and their calls
summed per item and per row; a bound far below 2^63 keeps every such sum exact (a file with a
larger count is refused at its line, exit 2, by either reader) rather than crashing or wrapping."""


class JudgeVote(BaseModel):
    """One judge's answer on one item, with how it was obtained and what it cost."""

    model_config = ConfigDict(extra="forbid")

    judge: str = Field(min_length=1)
    mode: Mode
    choice: Letter | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    p_a: float | None = Field(default=None, ge=0.0, le=1.0)
    tie: bool = False
    """The judge said the answers are equally good (no choice, ``p_a`` 0.5; module docstring)."""
    explanation: str = ""
    samples: list[Letter | None] = Field(default_factory=list)
    """MP: each sample's letter (``None`` for a sample that could not be read)."""
    signals: dict[str, float] = Field(default_factory=dict)
    """Extra per-judge numbers a learned fuser may use (e.g. a reward-model score margin)."""
    raw: str = ""
    latency_s: float = Field(default=0.0, ge=0.0)
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    calls: int = Field(default=0, ge=0, le=MAX_CALLS)
    """Model calls the vote took (at most :data:`MAX_CALLS`)."""
    cost_usd: float = Field(default=0.0, ge=0.0)
    error: str | None = None
    """Why the vote is invalid (an abstention, a parse failure, a transport error; a tie vote has none)."""
    notes: list[str] = Field(default_factory=list)
    """Non-fatal remarks, e.g. "logprobs unsupported: fell back to sc"."""

    @field_validator("confidence", "p_a")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("must be a finite number in [0, 1]")
        return value

    @field_validator("signals")
    @classmethod
    def _finite_signals(cls, value: dict[str, float]) -> dict[str, float]:
        for name, number in value.items():
            if not math.isfinite(number):
                raise ValueError(f"signal {name!r} must be finite, got {number!r}")
        return value

    @model_validator(mode="before")
    @classmethod
    def _tie_choice(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("choice") == "tie":
            data = {**data, "choice": None, "tie": True}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> JudgeVote:
        if self.tie:
            if self.choice is not None or self.confidence is not None or self.error is not None:
                raise ValueError("a tie vote has no choice, confidence or error")
            if self.p_a is None:
                self.p_a = 0.5
            elif self.p_a != 0.5:
                raise ValueError(f"a tie vote has p_a 0.5 (got {self.p_a!r})")
        if self.choice is None:
            if self.confidence is not None:
                raise ValueError("confidence must be null when choice is null (an invalid vote)")
        else:
            if self.confidence is None:
                raise ValueError(f"a vote for {self.choice} needs a confidence")
            if self.p_a is None:
                self.p_a = self.confidence if self.choice == "A" else 1.0 - self.confidence
        return self

    @property
    def valid(self) -> bool:
        """True when the vote names a letter with a confidence."""
        return self.choice is not None

    @property
    def failed(self) -> bool:
        """True when the vote gave no usable answer (no letter and no tie): the judge failed or
        abstained. A tie vote is an answer, so its verdict is not degraded by it."""
        return self.choice is None and not self.tie

    @property
    def outcome(self) -> Outcome | None:
        """``A``, ``B``, ``tie``, or None for a vote that gave no usable answer."""
        return "tie" if self.tie else self.choice

    @classmethod
    def tied(cls, judge: str, mode: Mode, **fields: Any) -> JudgeVote:
        """A vote saying the two answers are equally good (``p_a`` 0.5)."""
        return cls(judge=judge, mode=mode, tie=True, p_a=0.5, **fields)

    @classmethod
    def from_p_a(cls, judge: str, mode: Mode, p_a: float, **fields: Any) -> JudgeVote:
        """A vote whose choice and confidence follow from ``p_a``; exactly 0.5 is a tie vote.

        Why a tie and not an abstention: a judge whose P(A is better) is exactly 0.5 saw no
        difference, which is what a tie vote says, and docs/design.md ('Fusion', tie votes) counts
        that at ``p_a`` 0.5 in every voting rule. As an abstention it was counted twice over:
        ``mean_probability`` averaged its 0.5 in while the vote-share rules dropped it. The
        service's ``POST /v1/fuse`` takes a posted ``p_a`` 0.5 without a choice the same way.
        """
        if p_a > 0.5:
            return cls(judge=judge, mode=mode, choice="A", confidence=p_a, p_a=p_a, **fields)
        if p_a < 0.5:
            return cls(judge=judge, mode=mode, choice="B", confidence=1.0 - p_a, p_a=p_a, **fields)
        return cls.tied(judge, mode, **fields)

    @classmethod
    def invalid(cls, judge: str, mode: Mode, error: str, **fields: Any) -> JudgeVote:
        """A vote that could not be used, with the reason kept."""
        return cls(judge=judge, mode=mode, choice=None, error=error, **fields)


class JudgedItem(BaseModel):
    """An item with every vote cast on it: one line of a votes JSONL file.

    This is what ``judgefuse judge`` appends as judgments finish and what every offline
    loader produces, so ``judgefuse eval`` reads live runs and recorded benchmarks alike.
    """

    model_config = ConfigDict(extra="forbid")

    item: PairwiseItem
    votes: list[JudgeVote] = Field(default_factory=list)
