"""Cascade panels: ask the cheap judges first, escalate only the items they are unsure of.

A :class:`Cascade` is an ordered list of :class:`CascadeStage` (cheapest first). A stage is one
judge (its own vote is the stage's verdict) or several judges fused by a voting method
(``majority`` by default). Stage ``s`` **accepts** an item when its verdict has a choice and
``confidence >= threshold_s``; otherwise the item escalates to stage ``s + 1``. A stage with
``threshold=None`` never accepts (it only passes its votes on). After the last stage:

* ``fallback="review"``: the item goes to human review (``route="human_review"``); the verdict
  is the last stage's, as a suggestion.
* ``fallback="panel"``: the full panel (``panel_judges``, fused with ``panel_method``) decides,
  reusing every vote already drawn and asking only the judges not yet consulted; it accepts when
  ``confidence >= panel_threshold`` (default 0: always, as a panel without a cascade would;
  :func:`tune_cascade` tunes it like any stage), else human review.

Replay (:func:`run_cascade`, recorded votes) and live serving (:func:`run_cascade_async`, which
asks a ``fetch(judge_names)`` coroutine for the votes of the judges a stage adds) share the rule.
The verdict records the deciding stage: ``method="cascade"``, ``model_version``
``"cascade:2/3:mistral-7b-instruct"`` (``"cascade:review"`` when nobody accepted), one note per
stage consulted, ``threshold`` = the deciding stage's; its ``votes`` are the votes drawn (so a
verdict's calls/tokens/cost are those of the judges consulted). :class:`CascadeDecision` adds
the stage index, calls, tokens and cost. **Calls**: a vote's ``calls``; a recorded vote
(``mode="recorded"``, no calls recorded) counts as one call.

Tuning and evaluation (``tune_cascade``, ``evaluate_cascade``, ``CascadeReport``) live in
:mod:`judgefuse.fusion.cascade_tuning`, which imports this module (never the other way round).
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, Literal

from judgefuse.fusion.registry import FusionMethod, get_method, requires_fit
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.config import PanelConfig
from judgefuse.judges.types import JudgeVote

__all__ = [
    "Cascade",
    "CascadeDecision",
    "CascadeRun",
    "CascadeStage",
    "DeltaSplit",
    "cascade_from_config",
    "run_cascade",
    "run_cascade_async",
    "run_cascade_detailed",
    "vote_calls",
]

Fallback = Literal["review", "panel"]
DeltaSplit = Literal["bonferroni", "per_stage"]
"""How cascade tuning spends ``delta`` (:mod:`judgefuse.fusion.cascade_tuning`): ``bonferroni``
(the default: ``delta / stages`` per stage, a 1 - delta guarantee for the whole cascade) or
``per_stage`` (``delta`` per stage: each stage's guarantee only; the whole cascade's holds at
just 1 - stages x delta)."""


def vote_calls(vote: JudgeVote) -> int:
    """Model calls behind a vote; a recorded vote without a count is one call."""
    if vote.calls:
        return vote.calls
    return 1 if vote.mode == "recorded" else 0


@cache
def _method(name: str) -> FusionMethod:
    method = get_method(name)
    if requires_fit(method):
        raise ValueError(
            f"cascade stage method {name!r} must be fitted first: pass the fitted method as "
            "CascadeStage(fusion=...) instead of by name"
        )
    return method


@dataclass(frozen=True)
class CascadeStage:
    """One stage: its judges, how their votes are fused, and its acceptance threshold."""

    judges: tuple[str, ...]
    threshold: float | None = None
    method: str = "majority"
    """Fusion method name for a multi-judge stage (a single judge's stage uses its vote)."""
    name: str = ""
    fusion: FusionMethod | None = field(default=None, compare=False, repr=False)
    """A ready (e.g. fitted stacked) method to use instead of ``method``."""

    def __post_init__(self) -> None:
        judges = tuple(self.judges) if not isinstance(self.judges, str) else (self.judges,)
        object.__setattr__(self, "judges", judges)
        if not judges or any(not j for j in judges):
            raise ValueError("a cascade stage needs at least one judge name")
        if len(set(judges)) != len(judges):
            raise ValueError(f"a stage names a judge twice: {list(judges)}")
        if self.threshold is not None and not (math.isfinite(self.threshold) and 0.0 <= self.threshold <= 1.0):
            raise ValueError(f"a stage threshold must be in [0, 1] or None, got {self.threshold!r}")
        if not self.name:
            object.__setattr__(self, "name", "+".join(judges))

    def verdict(self, votes: Sequence[JudgeVote]) -> Verdict:
        """The stage's verdict from the votes of its judges (in stage order)."""
        if len(votes) == 1 and self.fusion is None:
            vote = votes[0]
            if vote.choice is None or vote.confidence is None:
                return Verdict(
                    choice=None, confidence=0.5, p_a=0.5, method=f"judge:{vote.judge}", votes=[vote],
                    n_invalid=1, notes=[f"{vote.judge}: no usable vote ({vote.error or 'invalid'})"],
                )  # fmt: skip
            p_a = vote.p_a if vote.p_a is not None else (vote.confidence if vote.choice == "A" else 1 - vote.confidence)
            return Verdict(
                choice=vote.choice, confidence=vote.confidence, p_a=p_a, method=f"judge:{vote.judge}",
                votes=[vote], n_valid=1,
            )  # fmt: skip
        method = self.fusion if self.fusion is not None else _method(self.method)
        return method(list(votes))

    def accepts(self, verdict: Verdict) -> bool:
        return self.threshold is not None and verdict.choice is not None and verdict.confidence >= self.threshold


@dataclass(frozen=True)
class Cascade:
    """Stages (cheapest first) and what happens to the items none of them accepts."""

    stages: tuple[CascadeStage, ...]
    fallback: Fallback = "review"
    panel_judges: tuple[str, ...] = ()
    panel_method: str = "majority"
    panel_threshold: float | None = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", tuple(self.stages))
        object.__setattr__(self, "panel_judges", tuple(self.panel_judges))
        if not self.stages:
            raise ValueError("a cascade needs at least one stage")
        if self.fallback not in ("review", "panel"):
            raise ValueError(f"fallback must be 'review' or 'panel', got {self.fallback!r}")
        if self.fallback == "panel" and not self.panel_judges:
            raise ValueError("fallback 'panel' needs panel_judges (every judge of the panel)")

    def all_stages(self) -> tuple[CascadeStage, ...]:
        """The stages, plus the full panel as a last stage when ``fallback == "panel"``."""
        if self.fallback != "panel":
            return self.stages
        panel = CascadeStage(self.panel_judges, threshold=self.panel_threshold, method=self.panel_method, name="panel")
        return (*self.stages, panel)

    def with_thresholds(self, thresholds: Sequence[float | None]) -> Cascade:
        """A copy with new thresholds for :meth:`all_stages` (the panel's last)."""
        n = len(self.stages)
        if len(thresholds) != len(self.all_stages()):
            raise ValueError(f"expected {len(self.all_stages())} thresholds, got {len(thresholds)}")
        stages = tuple(replace(s, threshold=t) for s, t in zip(self.stages, thresholds[:n], strict=True))
        panel_threshold = thresholds[n] if self.fallback == "panel" else self.panel_threshold
        return replace(self, stages=stages, panel_threshold=panel_threshold)

    @property
    def judges(self) -> list[str]:
        """Every judge the cascade may consult, in order of first use."""
        seen: dict[str, None] = {}
        for stage in self.all_stages():
            for judge in stage.judges:
                seen.setdefault(judge, None)
        return list(seen)


def cascade_from_config(config: PanelConfig) -> Cascade | None:
    """The panel YAML's ``cascade:`` as a :class:`Cascade` (None when the panel declares none)."""
    if config.cascade is None:
        return None
    stages = tuple(
        CascadeStage(tuple(stage.judges), threshold=stage.threshold, method=stage.method, name=stage.name or "")
        for stage in config.cascade
    )
    return Cascade(
        stages,
        fallback=config.cascade_fallback,
        panel_judges=tuple(judge.name for judge in config.judges),
        panel_method=config.fusion,
        panel_threshold=config.cascade_panel_threshold,
    )


@dataclass(frozen=True)
class CascadeDecision:
    """A cascade's verdict plus where it was decided and what it cost."""

    verdict: Verdict
    stage: int | None
    """0-based index into :meth:`Cascade.all_stages` of the accepting stage; None: review."""
    stages_consulted: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float

    @property
    def accepted(self) -> bool:
        return self.stage is not None


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


class CascadeRun:
    """The state of one item's walk down the cascade (shared by the sync and async runners,
    and by tuning, which scores one stage at a time)."""

    def __init__(self, cascade: Cascade) -> None:
        self.cascade = cascade
        self.stages = cascade.all_stages()
        self.consulted: dict[str, JudgeVote] = {}
        self.notes: list[str] = []

    def missing(self, stage: CascadeStage) -> list[str]:
        return [j for j in stage.judges if j not in self.consulted]

    def add(self, votes: Sequence[JudgeVote], wanted: Sequence[str]) -> None:
        by_name = {v.judge: v for v in votes}
        for judge in wanted:
            vote = by_name.get(judge)
            if vote is None:
                vote = JudgeVote.invalid(judge, "recorded", "no vote available for this judge")
            self.consulted[judge] = vote

    def step(self, index: int) -> tuple[Verdict, bool]:
        stage = self.stages[index]
        verdict = stage.verdict([self.consulted[j] for j in stage.judges])
        accepted = stage.accepts(verdict)
        where = f"stage {index + 1}/{len(self.stages)} ({stage.name})"
        if accepted:
            self.notes.append(f"cascade: {where} accepted: confidence {verdict.confidence:.4g} >= {_fmt(stage.threshold)}")
        elif stage.threshold is None:
            self.notes.append(f"cascade: {where} has no threshold (never accepts): escalated")
        elif verdict.choice is None:
            self.notes.append(f"cascade: {where} gave no usable verdict: escalated")
        else:
            self.notes.append(
                f"cascade: {where} confidence {verdict.confidence:.4g} below threshold {_fmt(stage.threshold)}: escalated"
            )
        return verdict, accepted

    def finish(self, verdict: Verdict, index: int, accepted: bool) -> CascadeDecision:
        stage = self.stages[index]
        votes = list(self.consulted.values())
        if accepted:
            route: Any = "auto_accept"
            version = f"cascade:{index + 1}/{len(self.stages)}:{stage.name}"
            threshold = stage.threshold
        else:
            route = "human_review"
            version = "cascade:review"
            threshold = None
            self.notes.append(f"cascade: no stage accepted: human review (suggestion from {stage.name})")
        final = verdict.model_copy(
            update={
                "method": "cascade",
                "votes": votes,
                "route": route,
                "threshold": threshold,
                "model_version": version,
                "notes": [*verdict.notes, *self.notes],
                "degraded": verdict.degraded or any(v.failed for v in votes),
            }
        )
        return CascadeDecision(
            verdict=final,
            stage=index if accepted else None,
            stages_consulted=index + 1,
            calls=sum(vote_calls(v) for v in votes),
            prompt_tokens=sum(v.prompt_tokens for v in votes),
            completion_tokens=sum(v.completion_tokens for v in votes),
            cost_usd=math.fsum(v.cost_usd for v in votes),
        )


def run_cascade_detailed(cascade: Cascade, votes: Sequence[JudgeVote] | Mapping[str, JudgeVote]) -> CascadeDecision:
    """Replay the cascade over already-drawn votes (only the judges a reached stage names count)."""
    available = list(votes.values()) if isinstance(votes, Mapping) else list(votes)
    run = CascadeRun(cascade)
    verdict: Verdict | None = None
    for index, stage in enumerate(run.stages):
        run.add(available, run.missing(stage))
        verdict, accepted = run.step(index)
        if accepted:
            return run.finish(verdict, index, True)
    assert verdict is not None
    return run.finish(verdict, len(run.stages) - 1, False)


def run_cascade(cascade: Cascade, votes: Sequence[JudgeVote] | Mapping[str, JudgeVote]) -> Verdict:
    """:func:`run_cascade_detailed`'s verdict."""
    return run_cascade_detailed(cascade, votes).verdict


async def run_cascade_async(
    cascade: Cascade, fetch: Callable[[Sequence[str]], Awaitable[Sequence[JudgeVote]]]
) -> CascadeDecision:
    """Live: ``fetch(names)`` draws the votes of the judges a stage adds (concurrently, say)."""
    run = CascadeRun(cascade)
    verdict: Verdict | None = None
    for index, stage in enumerate(run.stages):
        wanted = run.missing(stage)
        if wanted:
            run.add(await fetch(wanted), wanted)
        verdict, accepted = run.step(index)
        if accepted:
            return run.finish(verdict, index, True)
    assert verdict is not None
    return run.finish(verdict, len(run.stages) - 1, False)

