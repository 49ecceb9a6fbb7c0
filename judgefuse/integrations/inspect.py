"""An Inspect AI scorer backed by a judgefuse panel (``pip install 'judgefuse[inspect]'``).

Each sample's output is judged against its target (the reference answer) by a judgefuse
gateway, pairwise: the output is answer A, the other answer is B (``other`` picks it: the
target by default, or any function of the task state, e.g. a second solver's output kept in
the sample's metadata). The Score's ``value`` is the fused, calibrated probability that the
output is the better answer; its ``metadata`` carries the verdict (id, choice, confidence, p_a,
route, method) and each judge's vote; the explanation says how the judges split. ``mean()`` of
the value is the output's win rate against the other answer.

    from judgefuse.integrations.inspect import judgefuse_scorer

    Task(dataset=..., solver=generate(), scorer=judgefuse_scorer("http://localhost:8000"))

A grading failure (the gateway unreachable after its retries, a request it refuses) is raised:
Inspect then records the sample's error rather than a made-up score.
"""

from __future__ import annotations

from collections.abc import Callable

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState

from judgefuse.client import AsyncClient, RetryPolicy
from judgefuse.integrations.verdict_fields import explanation, verdict_metadata, win_probability

__all__ = ["judgefuse_scorer"]


def _target_text(state: TaskState, target: Target) -> str:
    return target.text


@scorer(metrics=[mean(), stderr()], name="judgefuse")
def judgefuse_scorer(
    base_url: str = "http://localhost:8000",
    api_key: str | None = None,
    *,
    panel: str | None = None,
    other: Callable[[TaskState, Target], str] = _target_text,
    retry: RetryPolicy | None = None,
    timeout_s: float | None = None,
) -> Scorer:
    """Score ``state.output`` (answer A) against ``other(state, target)`` (answer B) through
    the gateway at ``base_url``; ``panel`` None is the gateway's default panel."""

    async def score(state: TaskState, target: Target) -> Score:
        output = state.output.completion
        async with AsyncClient(base_url, api_key, retry=retry, timeout=timeout_s) as client:
            verdict = await client.judge(
                question=state.input_text, answer_a=output, answer_b=other(state, target),
                panel=panel, metadata={"inspect_sample_id": str(state.sample_id)},
            )
        return Score(
            value=win_probability(verdict),
            answer=output,
            explanation=explanation(verdict, names=("output", "other")),
            metadata=verdict_metadata(verdict),
        )

    return score
