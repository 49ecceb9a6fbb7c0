"""Voting baselines ("Overconfidence in LLM-as-a-Judge", section 5 "Baseline Methods";
docs/design.md, 'Fusion').

Pure functions over votes. Judge j votes ``v_j`` (its ``choice``) with confidence ``c_j``:

* ``majority``: most valid votes wins; confidence = the winner's share of the valid votes.
* ``confidence_weighted``: score(L) = sum of ``c_j`` over L's voters; confidence = winner / total.
* ``sqrt_confidence_weighted``: the same with ``sqrt(c_j)``.
* ``entropy_weighted``: ``w_j = 1 / (H(c_j) + 1e-6)`` (H: binary entropy in bits),
  score(L) = sum ``w_j c_j``; confidence = winner / total.
* ``mean_probability``: the mean of ``p_a`` over every vote that carries one (an abstaining vote
  may carry one, e.g. from reward margins); A iff the mean > 0.5; confidence = max(m, 1 - m).

Tie rules ("Overconfidence in LLM-as-a-Judge": "Ties are broken by the highest confidence
score"; "Ties use the maximum confidence"): when the two scores tie, the letter whose voters include the highest single
confidence wins (``tie_broken`` is True and a note says so). When that ties too, the verdict is
an **exact tie**: no choice, confidence and ``p_a`` 0.5, note :data:`~judgefuse.fusion.verdict.TIE_NOTE`
(routed to review by the service; scored offline as a tie, see ``evaluation/scoring.py``). The
same for ``mean_probability`` at a mean of exactly 0.5. Breaking it toward A would decide every
equal-confidence disagreement of a two-judge panel by the order the answers were shown in: the
position bias a position swap exists to remove. Scores are compared with a relative/absolute
tolerance of 1e-12 and summed with ``math.fsum`` so the order of the votes never matters.

One valid vote (a panel of one, or a degraded verdict where the other judges failed): every
method answers that vote's choice with that vote's own confidence
(:func:`single_valid_vote_verdict`). A vote share of one vote is 1.0, a certainty nobody claimed;
with two or more valid votes the paper's definitions above apply unchanged.

**Tie votes** (a judge said the answers are equally good, ``JudgeVote.tie``) are votes with
``p_a`` 0.5, not abstentions (docs/design.md, 'Fusion'): in the weighted rules each gives half its
weight at confidence 0.5 to each letter, so it never changes the winner but pulls the fused
confidence toward 0.5 (two A votes and one tie under ``majority``: 2.5 / 3 = 0.83, not 1.0);
``mean_probability`` averages its 0.5 in. A tie vote is not a failed judge, so an A/B vote beside
it does not get the one-valid-vote rule, and when every vote is a tie the verdict is an exact tie.
Tie votes count in neither ``n_valid`` nor ``n_invalid``; a note gives their number.

Invalid votes (``choice`` None, not a tie) are counted in ``n_invalid`` and otherwise ignored; with
no valid vote the verdict has ``choice=None``, ``confidence=p_a=0.5`` and a note saying why.
``Verdict.p_a`` is the confidence for A and one minus it for B.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from judgefuse.fusion.registry import fusion_method
from judgefuse.fusion.verdict import TIE_NOTE, Verdict
from judgefuse.judges.types import JudgeVote, Letter

TIE_TOLERANCE = 1e-12
"""Relative and absolute tolerance under which two scores (or a mean and 0.5) are a tie; the
columnar rules (:mod:`judgefuse.fusion.columnar`) use the same."""
_TOL = TIE_TOLERANCE
ENTROPY_EPS = 1e-6


def binary_entropy(c: float) -> float:
    """H(c) in bits; H(0) = H(1) = 0."""
    if c <= 0.0 or c >= 1.0:
        return 0.0
    return -(c * math.log2(c) + (1.0 - c) * math.log2(1.0 - c))


def _close(x: float, y: float) -> bool:
    return math.isclose(x, y, rel_tol=_TOL, abs_tol=_TOL)


TIE_VOTE_P_A = 0.5
"""A tie vote's probability for A: half its weight to each answer."""


def _count_invalid(votes: Sequence[JudgeVote]) -> tuple[list[JudgeVote], int]:
    valid = [v for v in votes if v.valid]
    return valid, len(votes) - len(valid) - count_tie_votes(votes)


def count_tie_votes(votes: Sequence[JudgeVote]) -> int:
    """How many of ``votes`` said the answers are equally good."""
    return sum(1 for v in votes if v.tie)


def tie_votes_note(n_ties: int) -> list[str]:
    """The note of a verdict that counted tie votes (empty when there were none)."""
    return [f"{n_ties} tie vote(s) counted as p_a 0.5"] if n_ties else []


def _undecided(method: str, votes: Sequence[JudgeVote], reason: str, n_invalid: int) -> Verdict:
    return Verdict(
        choice=None,
        confidence=0.5,
        p_a=0.5,
        method=method,
        votes=list(votes),
        n_valid=0,
        n_invalid=n_invalid,
        notes=[reason],
    )


def exact_tie(
    method: str, votes: Sequence[JudgeVote], *, n_valid: int, n_invalid: int, notes: Sequence[str] = ()
) -> Verdict:
    """The verdict of votes that favour neither answer: no choice, confidence 0.5, :data:`TIE_NOTE`."""
    return Verdict(
        choice=None,
        confidence=0.5,
        p_a=0.5,
        method=method,
        votes=list(votes),
        n_valid=n_valid,
        n_invalid=n_invalid,
        notes=[TIE_NOTE, *notes],
    )


def _verdict(
    method: str,
    votes: Sequence[JudgeVote],
    choice: Letter,
    confidence: float,
    *,
    n_valid: int,
    n_invalid: int,
    tie_broken: bool = False,
    notes: list[str] | None = None,
) -> Verdict:
    confidence = min(1.0, max(0.0, confidence))
    return Verdict(
        choice=choice,
        confidence=confidence,
        p_a=confidence if choice == "A" else 1.0 - confidence,
        method=method,
        votes=list(votes),
        n_valid=n_valid,
        n_invalid=n_invalid,
        tie_broken=tie_broken,
        notes=notes or [],
    )


def _max_conf(valid: Sequence[JudgeVote], letter: Letter) -> float:
    return max((v.confidence or 0.0 for v in valid if v.choice == letter), default=-1.0)


def _decide(
    valid: Sequence[JudgeVote], score_a: float, score_b: float
) -> tuple[Letter | None, bool, str | None]:
    """The winner of two scores with the tie rules; (letter or None for an exact tie, tie_broken, note)."""
    if not _close(score_a, score_b):
        return ("A" if score_a > score_b else "B"), False, None
    top_a, top_b = _max_conf(valid, "A"), _max_conf(valid, "B")
    if not _close(top_a, top_b):
        winner: Letter = "A" if top_a > top_b else "B"
        top = max(top_a, top_b)
        return winner, True, f"tie broken by the highest single confidence ({top:.4g})"
    return None, False, TIE_NOTE


def single_valid_vote_verdict(method: str, votes: Sequence[JudgeVote]) -> Verdict | None:
    """The verdict of the only valid vote, carrying that vote's confidence; None unless exactly
    one vote is valid. Shared by every fusion method so one judge's word is never promoted to a
    certainty it did not claim."""
    valid, n_invalid = _count_invalid(votes)
    if len(valid) != 1 or count_tie_votes(votes):
        return None
    vote = valid[0]
    assert vote.choice is not None  # valid
    confidence = vote.confidence if vote.confidence is not None else 0.5
    notes = [f"one valid vote ({vote.judge}): its own confidence {confidence:.4g}"]
    return _verdict(method, votes, vote.choice, confidence, n_valid=1, n_invalid=n_invalid, notes=notes)


def _weighted(
    method: str, votes: Sequence[JudgeVote], weight: Callable[[float], float]
) -> Verdict:
    valid, n_invalid = _count_invalid(votes)
    n_ties = count_tie_votes(votes)
    if not valid:
        if n_ties:
            return exact_tie(method, votes, n_valid=0, n_invalid=n_invalid, notes=tie_votes_note(n_ties))
        return _undecided(method, votes, "no valid vote: undecided", n_invalid)
    single = single_valid_vote_verdict(method, votes)
    if single is not None:
        return single
    half = [weight(TIE_VOTE_P_A) / 2.0] * n_ties
    score = {
        letter: math.fsum([*(weight(v.confidence or 0.0) for v in valid if v.choice == letter), *half])
        for letter in ("A", "B")
    }
    choice, tie_broken, note = _decide(valid, score["A"], score["B"])
    if choice is None:
        return exact_tie(method, votes, n_valid=len(valid), n_invalid=n_invalid, notes=tie_votes_note(n_ties))
    total = score["A"] + score["B"]
    notes = [note] if note else []
    notes.extend(tie_votes_note(n_ties))
    if total <= 0.0:
        confidence = 0.5
        notes.append("every vote has zero weight: confidence 0.5")
    else:
        confidence = score[choice] / total
    return _verdict(
        method,
        votes,
        choice,
        confidence,
        n_valid=len(valid),
        n_invalid=n_invalid,
        tie_broken=tie_broken,
        notes=notes,
    )


def majority(votes: Sequence[JudgeVote]) -> Verdict:
    """Most valid votes wins; confidence = the winner's share of valid votes."""
    return _weighted("majority", votes, lambda c: 1.0)


def confidence_weighted(votes: Sequence[JudgeVote]) -> Verdict:
    """score(L) = sum of c_j over L's voters; confidence = winner score / total."""
    return _weighted("confidence_weighted", votes, lambda c: c)


def sqrt_confidence_weighted(votes: Sequence[JudgeVote]) -> Verdict:
    """score(L) = sum of sqrt(c_j) over L's voters; confidence = winner score / total."""
    return _weighted("sqrt_confidence_weighted", votes, math.sqrt)


def entropy_weighted(votes: Sequence[JudgeVote]) -> Verdict:
    """score(L) = sum of w_j c_j, w_j = 1 / (H(c_j) + 1e-6); confidence = winner / total."""
    return _weighted(
        "entropy_weighted", votes, lambda c: c / (binary_entropy(c) + ENTROPY_EPS)
    )


def mean_probability(votes: Sequence[JudgeVote]) -> Verdict:
    """Mean of p_a over the votes that carry one; A iff mean > 0.5 (exactly 0.5: an exact tie)."""
    method = "mean_probability"
    single = single_valid_vote_verdict(method, votes)
    if single is not None:
        return single
    valid, n_invalid = _count_invalid(votes)
    carried = [v.p_a for v in votes if v.p_a is not None]
    if not carried:
        return _undecided(method, votes, "no vote carries p_a: undecided", n_invalid)
    mean = math.fsum(carried) / len(carried)
    notes: list[str] = []
    n_abstaining = sum(1 for v in votes if not v.valid and not v.tie and v.p_a is not None)
    notes.extend(tie_votes_note(count_tie_votes(votes)))
    if n_abstaining:
        notes.append(f"used p_a of {n_abstaining} abstaining vote(s)")
    if _close(mean, 0.5):
        return exact_tie(method, votes, n_valid=len(valid), n_invalid=n_invalid, notes=notes)
    choice: Letter = "A" if mean > 0.5 else "B"
    return _verdict(
        method, votes, choice, max(mean, 1.0 - mean),
        n_valid=len(valid), n_invalid=n_invalid, notes=notes,
    )


class VotingMethod:
    """A registered voting baseline: a named pure function; needs no fit."""

    requires_fit = False

    def __init__(self, name: str, function: Callable[[Sequence[JudgeVote]], Verdict]):
        self.name = name
        self._function = function

    def __call__(self, votes: Sequence[JudgeVote]) -> Verdict:
        return self._function(votes)

    def __repr__(self) -> str:
        return f"VotingMethod({self.name!r})"


VOTING_FUNCTIONS: dict[str, Callable[[Sequence[JudgeVote]], Verdict]] = {
    "majority": majority,
    "confidence_weighted": confidence_weighted,
    "sqrt_confidence_weighted": sqrt_confidence_weighted,
    "entropy_weighted": entropy_weighted,
    "mean_probability": mean_probability,
}


def _register(name: str, function: Callable[[Sequence[JudgeVote]], Verdict]) -> None:
    def factory() -> VotingMethod:
        return VotingMethod(name, function)

    factory.__qualname__ = f"voting[{name}]"
    fusion_method(name)(factory)


for _name, _function in VOTING_FUNCTIONS.items():
    _register(_name, _function)
