"""Position swap (:func:`position_swapped`): judge both answer orders, cancel position bias.

The item is judged as (A, B) and (B, A) concurrently; the second vote's choice and ``p_a`` are
flipped back; ``p_a`` is the mean of the two; the choice follows from it (exactly 0.5: invalid,
"position tie"). When both orders are valid and disagree, a note and
``signals["position_inconsistent"] = 1.0`` (else 0.0). When one order fails, the other is used
alone, with a note. Calls, tokens and cost are summed; latency is the max (the orders run
concurrently).

Its own module because it wraps any mode rather than being one;
:mod:`judgefuse.judges.modes` re-exports :func:`position_swapped`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.mode_calls import CallTally, ModeFunction
from judgefuse.judges.transport.request import ChatClient
from judgefuse.judges.types import JudgeVote, PairwiseItem, other

__all__ = ["position_swapped"]


def _flipped(vote: JudgeVote) -> JudgeVote:
    """A vote on the swapped item, expressed in the original order."""
    return vote.model_copy(
        update={
            "choice": None if vote.choice is None else other(vote.choice),
            "p_a": None if vote.p_a is None else 1.0 - vote.p_a,
            "samples": [None if s is None else other(s) for s in vote.samples],
        }
    )


async def position_swapped(
    mode: ModeFunction, config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """Judge both orders with ``mode`` and combine them (module docstring)."""
    swapped = item.model_copy(
        update={
            "answer_a": item.answer_b,
            "answer_b": item.answer_a,
            "label": None if item.label is None else other(item.label),
        }
    )
    first, second = await asyncio.gather(
        mode(config, client, item, model=model), mode(config, client, swapped, model=model)
    )
    back = _flipped(second)
    tally = CallTally()
    tally.add_vote(first)
    tally.add_vote(back)
    shared: dict[str, Any] = {
        "calls": tally.calls,
        "prompt_tokens": tally.prompt_tokens,
        "completion_tokens": tally.completion_tokens,
        "cost_usd": tally.cost_usd,
        "latency_s": max(first.latency_s, back.latency_s),
        "samples": [*first.samples, *back.samples],
        "raw": json.dumps({"order_ab": first.raw, "order_ba": second.raw}, ensure_ascii=False),
    }
    notes = [f"order AB: {n}" for n in first.notes] + [f"order BA: {n}" for n in back.notes]
    mode_name = first.mode
    if not first.valid and not back.valid:
        error = f"position swap: both orders invalid (AB: {first.error}; BA: {back.error})"
        return JudgeVote.invalid(config.name, mode_name, error, notes=notes, **shared)
    if not first.valid or not back.valid:
        used, failed, label = (back, first, "AB") if not first.valid else (first, back, "BA")
        notes.append(f"position swap: order {label} invalid ({failed.error}); used the other order alone")
        return JudgeVote(
            judge=config.name,
            mode=used.mode,
            choice=used.choice,
            confidence=used.confidence,
            p_a=used.p_a,
            explanation=used.explanation,
            notes=notes,
            **shared,
        )
    assert first.p_a is not None and back.p_a is not None  # valid votes always carry p_a
    p_a = (first.p_a + back.p_a) / 2.0
    inconsistent = first.choice != back.choice
    if inconsistent:
        notes.append(f"position inconsistent: order AB chose {first.choice}, order BA chose {back.choice}")
    signals = {**first.signals, "position_inconsistent": 1.0 if inconsistent else 0.0}
    if p_a == 0.5:
        return JudgeVote.invalid(
            config.name, mode_name, "position tie: the two orders' p_a average to exactly 0.5",
            p_a=0.5, signals=signals, notes=notes, explanation=first.explanation, **shared,
        )  # fmt: skip
    return JudgeVote.from_p_a(
        config.name, mode_name, p_a, signals=signals, notes=notes, explanation=first.explanation, **shared
    )
