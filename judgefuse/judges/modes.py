"""Confidence elicitation (docs/design.md, 'Confidence elicitation'): one judge, one item, one vote.

Each mode is ``async (config, client, item, *, model=None) -> JudgeVote``. Model and transport
failures never raise: they become an invalid vote (``choice=None``) whose ``error`` keeps the
reason (already redacted by the transport). Only programming errors raise.

* **SC** (:func:`sc_vote`): one call at the configured temperature (default 0), constrained to the
  verdict JSON schema where the backend allows (:mod:`judgefuse.judges.structured_output`); the
  reply is read with :func:`~judgefuse.prompts.parse_judgment`; a reply without a readable
  confidence is invalid.
* **MP** (:func:`mp_vote`, in :mod:`judgefuse.judges.mp_sampling`): ``k = samples`` samples at
  temperature T (default 0.7), by one ``n=k`` request, k seeded calls or adaptive rounds; the
  majority letter wins; confidence = majority count / valid samples.
* **Logprob** (:func:`logprob_vote`): temperature 0, ``max_tokens=1``, ``logprobs=True``,
  ``top_logprobs`` (default 5); :func:`~judgefuse.prompts.letter_probabilities` on the first
  token's top list. Neither letter listed: invalid, never guessed. A provider that cannot
  return logprobs (:class:`~.transport.Unsupported`) sends the judge to ``fallback_mode``
  (``sc`` by default, ``mp``, or ``none`` = an invalid vote with the reason), noted.
  The vote's ``mode`` is the mode that actually produced it.
* **Position swap** (:func:`position_swapped`, in :mod:`judgefuse.judges.position_swap`): the
  item is judged in both orders and the two votes are combined.

This module keeps the single-call modes and the dispatch (:func:`elicit`); the shared plumbing
is in :mod:`judgefuse.judges.mode_calls`. Every name listed in ``__all__`` stays importable here.
"""

from __future__ import annotations

import time

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.mode_calls import (
    CallTally,
    ModeFunction,
    chat_request,
    counted_call,
    describe_error,
    item_messages,
)
from judgefuse.judges.mp_sampling import mp_vote
from judgefuse.judges.position_swap import position_swapped
from judgefuse.judges.structured_output import call_structured
from judgefuse.judges.transport.errors import TransportError, Unsupported
from judgefuse.judges.transport.request import ChatClient
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.prompts import letter_probabilities, parse_judgment

__all__ = [
    "MODE_FUNCTIONS",
    "ModeFunction",
    "describe_error",
    "elicit",
    "logprob_vote",
    "mp_vote",
    "position_swapped",
    "sc_vote",
]


# ---------------------------------------------------------------- SC


async def sc_vote(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """One call; the judge's own JSON choice and 0-100 confidence."""
    started = time.perf_counter()
    tally = CallTally()
    request = chat_request(config, model, item_messages("sc", item, config.prompt_style))
    try:
        response, notes = await call_structured(config, request, lambda r: counted_call(client, r, tally))
    except TransportError as exc:
        return JudgeVote.invalid(config.name, "sc", describe_error(exc), **tally.fields(started))
    text = response.texts[0] if response.texts else ""
    parsed = parse_judgment(text)
    fields = tally.fields(started)
    notes = [*notes, *parsed.notes]
    if parsed.choice is None or parsed.confidence is None:
        error = parsed.error or "no usable verdict"
        return JudgeVote.invalid(
            config.name, "sc", error, raw=text, explanation=parsed.explanation, notes=notes, **fields
        )
    confidence, note = parsed.choice_confidence()
    if note:
        notes.append(note)
    return JudgeVote(
        judge=config.name,
        mode="sc",
        choice=parsed.choice,
        confidence=confidence,
        explanation=parsed.explanation,
        raw=text,
        notes=notes,
        **fields,
    )


# ---------------------------------------------------------------- logprob


def _merge_fallback(vote: JudgeVote, tally: CallTally, started: float, note: str) -> JudgeVote:
    tally.add_vote(vote)
    fields = tally.fields(started)
    return vote.model_copy(update={**fields, "notes": [note, *vote.notes]})


async def logprob_vote(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """One token; p_a from the two letters' top logprobs (module docstring)."""
    started = time.perf_counter()
    tally = CallTally()
    request = chat_request(
        config,
        model,
        item_messages("logprob", item, config.prompt_style),
        temperature=0.0,
        max_tokens=1,
        logprobs=True,
        top_logprobs=config.top_logprobs,
    )
    try:
        response = await counted_call(client, request, tally)
    except Unsupported as exc:
        reason = describe_error(exc)
        if config.fallback_mode == "none":
            return JudgeVote.invalid(
                config.name, "logprob", f"logprobs unsupported: {reason}", **tally.fields(started)
            )
        vote = await MODE_FUNCTIONS[config.fallback_mode](config, client, item, model=model)
        note = f"logprobs unsupported ({reason}): fell back to {config.fallback_mode}"
        return _merge_fallback(vote, tally, started, note)
    except TransportError as exc:
        return JudgeVote.invalid(config.name, "logprob", describe_error(exc), **tally.fields(started))
    text = response.texts[0] if response.texts else ""
    top = response.first_token_top_logprobs[0] if response.first_token_top_logprobs else []
    probs = letter_probabilities(top)
    fields = tally.fields(started)
    notes = list(probs.notes)
    if probs.p_a is None:
        return JudgeVote.invalid(
            config.name, "logprob", probs.error or "no letter probabilities", raw=text, notes=notes, **fields
        )
    return JudgeVote.from_p_a(config.name, "logprob", probs.p_a, raw=text, notes=notes, **fields)


MODE_FUNCTIONS: dict[str, ModeFunction] = {"sc": sc_vote, "mp": mp_vote, "logprob": logprob_vote}


# ---------------------------------------------------------------- dispatch


async def elicit(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """The vote of ``config.mode``, position-swapped when ``config.position_swap``."""
    mode = MODE_FUNCTIONS[config.mode]
    if config.position_swap:
        return await position_swapped(mode, config, client, item, model=model)
    return await mode(config, client, item, model=model)
