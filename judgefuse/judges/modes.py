"""Confidence elicitation (DESIGN.md "Confidence elicitation"): one judge, one item, one vote.

Each mode is ``async (config, client, item, *, model=None) -> JudgeVote``. Model and transport
failures never raise: they become an invalid vote (``choice=None``) whose ``error`` keeps the
reason (already redacted by the transport). Only programming errors raise.

* **SC** (:func:`sc_vote`): one call at the configured temperature (default 0); the reply is read
  with :func:`~judgefuse.prompts.parse_judgment`; a reply without a readable confidence is invalid.
* **MP** (:func:`mp_vote`): ``k = samples`` samples at temperature T (default 0.7). One request
  with ``n=k`` when allowed (``use_n`` True or None); on ``Unsupported(feature="n")`` (or
  ``use_n=False``) k concurrent calls with seeds ``seed + i`` and sample indices ``i`` (so the
  response cache never collapses them), noted in the vote. Each sample is read without a
  confidence; the majority letter wins; confidence = majority count / valid samples.
  **Tie rule**: an equal count is broken toward the letter of the first valid sample (sample
  order = choice index, or call index), which is neutral between positions; a note says so.
  No valid sample: invalid vote.
  **Adaptive MP** (``adaptive: true``): the samples are drawn in rounds and the draw stops
  early by the sequential rule of :mod:`judgefuse.judges.adaptive` (``samples`` is the
  maximum); ``vote.samples`` holds the samples drawn and a note says
  ``"adaptive: stopped after k of K samples (reason, r rounds)"``.
* **Logprob** (:func:`logprob_vote`): temperature 0, ``max_tokens=1``, ``logprobs=True``,
  ``top_logprobs`` (default 5); :func:`~judgefuse.prompts.letter_probabilities` on the first
  token's top list. Neither letter listed: invalid, never guessed. A provider that cannot
  return logprobs (:class:`~.transport.Unsupported`) sends the judge to ``fallback_mode``
  (``sc`` by default, ``mp``, or ``none`` = an invalid vote with the reason), noted.
  The vote's ``mode`` is the mode that actually produced it.
* **Position swap** (:func:`position_swapped`): the item is judged as (A, B) and (B, A)
  concurrently; the second vote's choice and ``p_a`` are flipped back; ``p_a`` is the mean of
  the two; the choice follows from it (exactly 0.5: invalid, "position tie"). When both orders
  are valid and disagree, a note and ``signals["position_inconsistent"] = 1.0`` (else 0.0).
  When one order fails, the other is used alone, with a note. Calls, tokens and cost are
  summed; latency is the max (the orders run concurrently).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from judgefuse.judges.adaptive import adaptive_note, sample_adaptively
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.errors import BadRequest, TransportError, Unsupported
from judgefuse.judges.transport.request import (
    ChatClient,
    ChatRequest,
    ChatResponse,
    Message,
)
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem, other
from judgefuse.prompts import letter_probabilities, parse_judgment, render_messages

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


class ModeFunction(Protocol):
    def __call__(
        self, config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
    ) -> Awaitable[JudgeVote]: ...


def describe_error(exc: BaseException) -> str:
    """``"RateLimited: HTTP 429: ..."``: the class and the (already redacted) message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class _Tally:
    """Calls, tokens and cost of one vote (a failed call counts as a call)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, response: ChatResponse) -> None:
        self.calls += 1
        self.prompt_tokens += response.prompt_tokens
        self.completion_tokens += response.completion_tokens
        self.cost_usd += response.cost_usd

    def add_vote(self, vote: JudgeVote) -> None:
        self.calls += vote.calls
        self.prompt_tokens += vote.prompt_tokens
        self.completion_tokens += vote.completion_tokens
        self.cost_usd += vote.cost_usd

    def fields(self, started: float) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost_usd": self.cost_usd,
            "latency_s": time.perf_counter() - started,
        }


async def _call(client: ChatClient, request: ChatRequest, tally: _Tally) -> ChatResponse:
    """``client.complete``; counts the call whether it succeeds or raises a TransportError."""
    try:
        response = await client.complete(request)
    except TransportError:
        tally.calls += 1
        raise
    tally.add(response)
    return response


def _messages(mode: str, item: PairwiseItem) -> list[Message]:
    return render_messages(mode, question=item.question, answer_a=item.answer_a, answer_b=item.answer_b)


def _request(config: JudgeConfig, model: str | None, messages: list[Message], **fields: Any) -> ChatRequest:
    fields.setdefault("temperature", config.temperature)
    fields.setdefault("max_tokens", config.max_tokens)
    return ChatRequest(model=model or config.model, messages=messages, timeout_s=config.timeout_s, **fields)


# ---------------------------------------------------------------- SC


async def sc_vote(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """One call; the judge's own JSON choice and 0-100 confidence."""
    started = time.perf_counter()
    tally = _Tally()
    request = _request(config, model, _messages("sc", item))
    try:
        response = await _call(client, request, tally)
    except TransportError as exc:
        return JudgeVote.invalid(config.name, "sc", describe_error(exc), **tally.fields(started))
    text = response.texts[0] if response.texts else ""
    parsed = parse_judgment(text)
    fields = tally.fields(started)
    if parsed.choice is None or parsed.confidence is None:
        error = parsed.error or "no usable verdict"
        return JudgeVote.invalid(
            config.name, "sc", error, raw=text, explanation=parsed.explanation, notes=list(parsed.notes), **fields
        )
    return JudgeVote(
        judge=config.name,
        mode="sc",
        choice=parsed.choice,
        confidence=parsed.confidence,
        explanation=parsed.explanation,
        raw=text,
        notes=list(parsed.notes),
        **fields,
    )


# ---------------------------------------------------------------- MP


async def _mp_texts_with_n(
    config: JudgeConfig, client: ChatClient, messages: list[Message], model: str | None, tally: _Tally
) -> list[str]:
    request = _request(config, model, messages, n=config.samples, seed=config.seed)
    response = await _call(client, request, tally)
    return list(response.texts)


async def _mp_texts_by_calls(
    config: JudgeConfig, client: ChatClient, messages: list[Message], model: str | None, tally: _Tally
) -> tuple[list[str | None], list[str]]:
    """k concurrent calls, sample i with seed ``seed + i``; (texts or None, per-sample errors)."""

    async def one(index: int) -> str | TransportError:
        request = _request(config, model, messages, seed=config.seed + index, sample_index=index)
        try:
            response = await _call(client, request, tally)
        except TransportError as exc:
            return exc
        return response.texts[0] if response.texts else ""

    results = await asyncio.gather(*(one(i) for i in range(config.samples)))
    texts: list[str | None] = []
    errors: list[str] = []
    for index, result in enumerate(results):
        if isinstance(result, TransportError):
            texts.append(None)
            errors.append(f"sample {index}: {describe_error(result)}")
        else:
            texts.append(result)
    return texts, errors


async def _mp_texts_adaptive(
    config: JudgeConfig,
    client: ChatClient,
    messages: list[Message],
    model: str | None,
    tally: _Tally,
    notes: list[str],
) -> tuple[list[str | None], list[str]]:
    """Adaptive MP (:mod:`judgefuse.judges.adaptive`): rounds until the stopping rule fires.

    A round of ``count`` samples starting at index ``start`` is one request with ``n=count``
    and ``seed=seed+start`` when ``n`` is allowed (falling back for good to per-sample calls on
    ``Unsupported(feature="n")``), else ``count`` concurrent calls with seeds ``seed+i``. A
    failed request makes its samples failed (``None``), as on the per-call path.
    """
    texts: list[str | None] = []
    errors: list[str] = []
    use_n = config.use_n is not False

    def letter(text: str | None) -> Letter | None:
        return None if text is None else parse_judgment(text, require_confidence=False).choice

    async def one(index: int) -> str | TransportError:
        request = _request(config, model, messages, seed=config.seed + index, sample_index=index)
        try:
            response = await _call(client, request, tally)
        except TransportError as exc:
            return exc
        return response.texts[0] if response.texts else ""

    async def draw(start: int, count: int) -> list[Letter | None]:
        nonlocal use_n
        got: list[str | None] | None = None
        if use_n and count > 1:
            request = _request(config, model, messages, n=count, seed=config.seed + start)
            try:
                response = await _call(client, request, tally)
            except BadRequest as exc:
                if not _n_refused(exc, config):
                    errors.append(f"samples {start}..{start + count - 1}: {describe_error(exc)}")
                    got = [None] * count
                else:
                    use_n = False
                    notes.append(
                        f"n unsupported (n={count} refused: {describe_error(exc)}): "
                        f"fell back to per-sample calls from sample {start}"
                    )
            except TransportError as exc:
                errors.extend(f"sample {start + i}: {describe_error(exc)}" for i in range(count))
                got = [None] * count
            else:
                got = list(response.texts[:count])
                if len(got) != count:
                    notes.append(f"asked for n={count}, got {len(got)} choices")
                    got += [None] * (count - len(got))
        if got is None:
            results = await asyncio.gather(*(one(start + i) for i in range(count)))
            got = []
            for i, result in enumerate(results):
                if isinstance(result, TransportError):
                    errors.append(f"sample {start + i}: {describe_error(result)}")
                    got.append(None)
                else:
                    got.append(result)
        texts.extend(got)
        return [letter(text) for text in got]

    result = await sample_adaptively(
        draw,
        max_samples=config.samples,
        round_size=config.round_size,
        min_samples=config.min_samples,
        stop_confidence=config.stop_confidence,
    )
    notes.append(adaptive_note(result))
    return texts, errors


def _majority(samples: list[Letter | None]) -> tuple[Letter, float, str | None] | None:
    """(letter, share, tie note) over the valid samples; None when none is valid."""
    valid = [s for s in samples if s is not None]
    if not valid:
        return None
    count_a = valid.count("A")
    count_b = len(valid) - count_a
    if count_a != count_b:
        winner: Letter = "A" if count_a > count_b else "B"
        return winner, max(count_a, count_b) / len(valid), None
    first = valid[0]
    note = f"MP tie {count_a}-{count_b}: broken toward the first valid sample's letter ({first})"
    return first, 0.5, note


def _n_refused(exc: BadRequest, config: JudgeConfig) -> bool:
    """Whether a refused ``n > 1`` request should fall back to one call per sample.

    Yes when the provider said ``n`` is unsupported; also for any other 400 while ``use_n`` is
    left to auto (None): llama.cpp, for one, refuses ``n`` with a plain 400 that names no
    parameter, and we do not read error text. The per-sample calls then show whether the
    request itself was bad (they fail too, and the vote keeps their errors).
    """
    if isinstance(exc, Unsupported):
        return exc.feature == "n"
    return config.use_n is None


async def mp_vote(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """k samples, majority letter, confidence = majority share (module docstring)."""
    started = time.perf_counter()
    tally = _Tally()
    messages = _messages("mp", item)
    notes: list[str] = []
    texts: list[str | None] | None = None
    errors: list[str] = []
    if config.adaptive and config.samples > 1:
        texts, errors = await _mp_texts_adaptive(config, client, messages, model, tally, notes)
    elif config.use_n is not False and config.samples > 1:
        try:
            texts = list(await _mp_texts_with_n(config, client, messages, model, tally))
        except BadRequest as exc:
            if not _n_refused(exc, config):
                return JudgeVote.invalid(config.name, "mp", describe_error(exc), **tally.fields(started))
            notes.append(
                f"n unsupported (n={config.samples} refused: {describe_error(exc)}): fell back to {config.samples} "
                f"concurrent calls with seeds {config.seed}..{config.seed + config.samples - 1}"
            )
        except TransportError as exc:
            return JudgeVote.invalid(config.name, "mp", describe_error(exc), **tally.fields(started))
        else:
            if len(texts) != config.samples:
                notes.append(f"asked for n={config.samples}, got {len(texts)} choices")
    if texts is None:
        texts, errors = await _mp_texts_by_calls(config, client, messages, model, tally)
    samples: list[Letter | None] = []
    explanations: dict[Letter, str] = {}
    for text in texts:
        letter = None if text is None else parse_judgment(text, require_confidence=False).choice
        samples.append(letter)
        if letter is not None and letter not in explanations:
            explanations[letter] = parse_judgment(text or "", require_confidence=False).explanation
    raw = json.dumps(texts, ensure_ascii=False)
    n_unread = sum(1 for s, t in zip(samples, texts, strict=True) if s is None and t is not None)
    if n_unread:
        notes.append(f"{n_unread} of {len(texts)} samples unreadable")
    if errors:
        notes.append(f"{len(errors)} of {len(texts)} sample calls failed; first: {errors[0]}")
    fields = tally.fields(started)
    outcome = _majority(samples)
    if outcome is None:
        error = errors[0] if errors and len(errors) == len(texts) else "no valid MP sample"
        return JudgeVote.invalid(config.name, "mp", error, samples=samples, raw=raw, notes=notes, **fields)
    letter, share, tie_note = outcome
    if tie_note:
        notes.append(tie_note)
    return JudgeVote(
        judge=config.name,
        mode="mp",
        choice=letter,
        confidence=share,
        explanation=explanations.get(letter, ""),
        samples=samples,
        raw=raw,
        notes=notes,
        **fields,
    )


# ---------------------------------------------------------------- logprob


def _merge_fallback(vote: JudgeVote, tally: _Tally, started: float, note: str) -> JudgeVote:
    tally.add_vote(vote)
    fields = tally.fields(started)
    return vote.model_copy(update={**fields, "notes": [note, *vote.notes]})


async def logprob_vote(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """One token; p_a from the two letters' top logprobs (module docstring)."""
    started = time.perf_counter()
    tally = _Tally()
    request = _request(
        config,
        model,
        _messages("logprob", item),
        temperature=0.0,
        max_tokens=1,
        logprobs=True,
        top_logprobs=config.top_logprobs,
    )
    try:
        response = await _call(client, request, tally)
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


# ---------------------------------------------------------------- position swap


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
    tally = _Tally()
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


async def elicit(
    config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
) -> JudgeVote:
    """The vote of ``config.mode``, position-swapped when ``config.position_swap``."""
    mode = MODE_FUNCTIONS[config.mode]
    if config.position_swap:
        return await position_swapped(mode, config, client, item, model=model)
    return await mode(config, client, item, model=model)

