"""Votes cast elsewhere (``POST /v1/fuse``), checked against the panel and turned into the
:class:`~judgefuse.judges.types.JudgeVote` list a panel fan-out would have produced.

"Bring your own votes" must not become a second implementation of anything: the gateway
fuses, routes, stamps and stores these votes exactly as it does its own judges' (docs/design.md,
'The review loop'). So the list has the panel's shape: one vote per judge, in the panel's
order; a judge the client did not post gets an invalid vote ("no vote posted"), as a judge
that timed out would. Everything a client can get wrong is a 422 naming the field, raised
before anything is stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from judgefuse.judges.types import JudgeVote
from judgefuse.service.errors import FieldProblem
from judgefuse.service.judging.panels import PanelRuntime
from judgefuse.service.schemas import FuseVote

__all__ = ["NOT_POSTED", "posted_votes"]

NOT_POSTED = "no vote posted for this judge"


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


def posted_votes(runtime: PanelRuntime, posted: Sequence[FuseVote], *, prefix: str) -> list[JudgeVote]:
    """One vote per judge of the panel, in its order (see the module docstring)."""
    judges = {judge.config.name: judge.config for judge in runtime.panel.judges}
    by_judge: dict[str, JudgeVote] = {}
    for i, vote in enumerate(posted):
        field = f"{prefix}.votes[{i}]"
        config = judges.get(vote.judge)
        if config is None:
            raise FieldProblem(
                f"{field}.judge",
                f"panel {runtime.name!r} has no judge {vote.judge!r}; its judges: "
                f"{', '.join(judges)}",
            )
        if vote.judge in by_judge:
            raise FieldProblem(f"{field}.judge", f"a second vote for judge {vote.judge!r}")
        by_judge[vote.judge] = _vote(vote, vote.mode or config.mode, field)
    return [
        by_judge.get(name) or JudgeVote.invalid(name, config.mode, NOT_POSTED)
        for name, config in judges.items()
    ]
