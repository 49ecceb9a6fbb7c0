"""Votes cast elsewhere (``POST /v1/fuse``), checked against the panel and turned into the
:class:`~judgefuse.judges.types.JudgeVote` list a panel fan-out would have produced.

"Bring your own votes" must not become a second implementation of anything: the gateway
fuses, routes, stamps and stores these votes exactly as it does its own judges' (docs/design.md,
'The review loop'). So the list has the panel's shape: one vote per judge, in the panel's
order; a judge the client did not post gets an invalid vote ("no vote posted"), as a judge
that timed out would. Everything a client can get wrong is a 422 naming the field, raised
before anything is stored:

* a judge the panel does not have, or one it asks itself (only judges declared
  ``external: true`` may be posted: a model judge's calibration, drift and refit features are
  the gateway's own measurements, not a client's);
* a second vote for one judge;
* a ``p_a`` that contradicts the vote's choice and confidence (``p_a`` is P(A is better): for
  a vote for A it must equal the confidence, for B one minus it, within :data:`P_A_TOLERANCE`;
  a client sends either and the gateway derives the other, or both in agreement). A
  contradicting ``p_a`` would flip ``mean_probability`` verdicts to the other answer;
* more ``signals`` than ``max_signals_per_vote``, a signal name longer than
  ``max_signal_name_chars`` (docs/design.md, 'Bounded learning'), or text that cannot be stored
  (:func:`~judgefuse.service.judging.request_checks.storable`) in a name or an explanation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from judgefuse.judges.types import JudgeVote
from judgefuse.service.errors import FieldProblem
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.stored_text import storable, unstorable_problem
from judgefuse.service.schemas import FuseVote
from judgefuse.service.settings import LearningSettings

__all__ = ["NOT_POSTED", "P_A_TOLERANCE", "posted_votes", "same_votes", "votes_key"]

NOT_POSTED = "no vote posted for this judge"
P_A_TOLERANCE = 1e-6
"""How far a posted ``p_a`` may be from what its choice and confidence say (rounding)."""


def _check_p_a(posted: FuseVote, field: str) -> None:
    """The module docstring's rule for a vote that gives ``p_a`` beside a choice or a confidence."""
    p_a = posted.p_a
    if p_a is None or posted.confidence is None:
        return
    if "choice" not in posted.model_fields_set:
        expected = max(p_a, 1.0 - p_a)
        if abs(posted.confidence - expected) > P_A_TOLERANCE:
            raise FieldProblem(
                f"{field}.p_a", f"p_a {p_a:g} contradicts confidence {posted.confidence:g}: a vote "
                f"with p_a {p_a:g} has confidence {expected:g} (send one of them, or both in agreement)",
            )
        return
    if posted.choice is None:
        return
    expected = posted.confidence if posted.choice == "A" else 1.0 - posted.confidence
    if abs(p_a - expected) > P_A_TOLERANCE:
        side = ">= 0.5" if posted.choice == "A" else "<= 0.5"
        raise FieldProblem(
            f"{field}.p_a",
            f"p_a {p_a:g} contradicts choice {posted.choice} with confidence {posted.confidence:g}: "
            f"p_a is P(A is better), so it must be {expected:g} ({side}); send choice and "
            "confidence, or p_a alone",
        )


def _check_text(posted: FuseVote, field: str, limits: LearningSettings) -> None:
    signals = posted.signals
    if len(signals) > limits.max_signals_per_vote:
        raise FieldProblem(f"{field}.signals", f"{len(signals)} signals; at most "
                                               f"{limits.max_signals_per_vote} signals per vote "
                                               "(max_signals_per_vote)")
    for name in signals:
        if len(name) > limits.max_signal_name_chars:
            raise FieldProblem(f"{field}.signals", f"a signal name of {len(name)} characters; at most "
                                                   f"{limits.max_signal_name_chars} characters "
                                                   "(max_signal_name_chars)")
        if not name or not storable(name):
            raise FieldProblem(f"{field}.signals", "a signal name " + (unstorable_problem(name) if name
                                                                        else "is empty"))
    if not storable(posted.explanation):
        raise FieldProblem(f"{field}.explanation", unstorable_problem(posted.explanation))


def _vote(posted: FuseVote, mode: str, field: str) -> JudgeVote:
    fields: dict[str, Any] = {"signals": posted.signals, "explanation": posted.explanation}
    try:
        if "choice" not in posted.model_fields_set and posted.p_a is not None:
            return JudgeVote.from_p_a(posted.judge, mode, posted.p_a, **fields)  # type: ignore[arg-type]
        if posted.choice is None:
            if posted.confidence is not None:
                raise FieldProblem(f"{field}.confidence", "must be null when choice is null")
            return JudgeVote.invalid(posted.judge, mode, "abstained (posted vote)",  # type: ignore[arg-type]
                                     p_a=posted.p_a, **fields)
        if posted.confidence is None:
            raise FieldProblem(f"{field}.confidence", f"a vote for {posted.choice} needs a confidence")
        return JudgeVote(judge=posted.judge, mode=mode, choice=posted.choice,  # type: ignore[arg-type]
                         confidence=posted.confidence, p_a=posted.p_a, **fields)
    except ValidationError as exc:
        problem = "; ".join(str(e.get("msg", "invalid")) for e in exc.errors(include_input=False))
        raise FieldProblem(field, problem) from None


def posted_votes(
    runtime: PanelRuntime, posted: Sequence[FuseVote], *, prefix: str,
    limits: LearningSettings | None = None,
) -> list[JudgeVote]:
    """One vote per judge of the panel, in its order (see the module docstring). ``limits``:
    the signal bounds (default: the settings' defaults)."""
    limits = limits or LearningSettings()
    judges = {judge.config.name: judge.config for judge in runtime.panel.judges}
    by_judge: dict[str, JudgeVote] = {}
    for i, vote in enumerate(posted):
        field = f"{prefix}.votes[{i}]"
        config = judges.get(vote.judge)
        if config is None:
            external = [name for name, c in judges.items() if c.external]
            raise FieldProblem(
                f"{field}.judge",
                f"panel {runtime.name!r} has no judge {vote.judge!r}; the judges it takes posted "
                f"votes for: {', '.join(external) or 'none'}",
            )
        if not config.external:
            raise FieldProblem(
                f"{field}.judge",
                f"judge {vote.judge!r} of panel {runtime.name!r} is a model judge the gateway asks "
                "itself; only judges declared external: true in the panel file take posted votes",
            )
        if vote.judge in by_judge:
            raise FieldProblem(f"{field}.judge", f"a second vote for judge {vote.judge!r}")
        _check_text(vote, field, limits)
        _check_p_a(vote, field)
        by_judge[vote.judge] = _vote(vote, vote.mode or config.mode, field)
    return [
        by_judge.get(name) or JudgeVote.invalid(name, config.mode, NOT_POSTED)
        for name, config in judges.items()
    ]


def votes_key(votes: Sequence[JudgeVote]) -> tuple[object, ...]:
    """What makes two posted vote lists the same (a replay's, and a request in flight's)."""
    return tuple((v.judge, v.mode, v.choice, v.confidence, v.p_a, v.error,
                  tuple(sorted(v.signals.items())), v.explanation) for v in votes)


def same_votes(stored: Sequence[JudgeVote], posted: Sequence[JudgeVote]) -> bool:
    """True when a replayed ``/v1/fuse`` request posts the votes its stored verdict was made
    from (then it gets that verdict; other votes under the same id are a 409)."""
    return votes_key(stored) == votes_key(posted)
