"""Serving a cascade panel live: the walk and its ``cascade`` answer (the route it implies is
decided with every other route, by :func:`judgefuse.service.judging.routing.cascade_route`).

Cascade panels (``cascade:`` in the panel YAML, :mod:`judgefuse.fusion.cascade`): a request
that names no ``method`` walks the cascade (:func:`~judgefuse.fusion.cascade.run_cascade_async`):
each stage asks only the judges it adds (concurrently, through the panel's own judges, within
what is left of the panel's ``deadline_s`` for the whole walk), and accepts when its
confidence clears its threshold. The cascade routes the verdict itself: a stage that accepts
-> ``auto_accept`` under the cascade's guarantee (the stage thresholds were tuned offline with
``judgefuse tune --cascade`` on labelled data, fixed-sequence Clopper-Pearson per stage, and
pasted into the YAML); no stage accepts -> ``human_review`` (the last stage's verdict is the
suggestion), or with ``cascade_fallback: panel`` the full panel decides at
``cascade_panel_threshold``. The stored per-(tenant, panel) threshold is not used for cascade
verdicts, and cascade thresholds are not re-tuned live from the store (``POST
/v1/thresholds/tune`` on a cascade panel answers 422 unless it names a voting method). The
response's ``cascade`` says which stage decided; its ``votes`` and ``cost`` are those of the
judges consulted. Quorum: a cascade accepts on its stages' own votes; the request fails (503)
only when no consulted judge gave a usable vote. A request naming a ``method`` bypasses the
cascade: every judge, fused with that method, routed by the stored threshold.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from judgefuse.fusion.cascade import CascadeDecision, run_cascade_async
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.kernel.verdict_out import cascade_out
from judgefuse.service.schemas import CascadeOut

__all__ = ["live_cascade_out", "walk_cascade"]


async def walk_cascade(
    runtime: PanelRuntime, item: PairwiseItem, *, tenant: str | None = None
) -> tuple[CascadeDecision, float]:
    """Run the panel's cascade live: each stage asks only the judges it adds, within what
    is left of the panel deadline (``tenant``: whose request, for the judges' fair share).
    Returns the decision and the judges' share of the wall time (the sum over stages of the
    slowest vote drawn at that stage)."""
    assert runtime.cascade is not None
    panel = runtime.panel
    judges = {judge.name: judge for judge in panel.judges}
    deadline_s = panel.config.deadline_s
    started = time.perf_counter()
    waited = 0.0

    async def fetch(names: Sequence[str]) -> list[JudgeVote]:
        nonlocal waited
        budget = None
        if deadline_s is not None:
            budget = max(0.0, deadline_s - (time.perf_counter() - started))
        votes = await panel.judge_with([judges[name] for name in names], item, timeout_s=budget, tenant=tenant)
        waited += max((v.latency_s for v in votes), default=0.0)
        return votes

    decision = await run_cascade_async(runtime.cascade, fetch)
    return decision, waited


def live_cascade_out(runtime: PanelRuntime, decision: CascadeDecision) -> tuple[CascadeOut, str]:
    """The response's ``cascade`` for a live walk, and the stage label the metrics count it
    under (``"<n>:<name>"`` of the stage that accepted, or ``"review"``)."""
    assert runtime.cascade is not None
    stages = runtime.cascade.all_stages()
    out = cascade_out(
        decision, stages=len(stages), names=[st.name for st in stages],
        fallback=runtime.cascade.fallback,
    )
    stage = ("review" if decision.stage is None
             else f"{decision.stage + 1}:{stages[decision.stage].name}")
    return out, stage
