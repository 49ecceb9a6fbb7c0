"""MP elicitation (:func:`mp_vote`): k samples at temperature T, the majority letter wins.

``k = samples`` samples at temperature T (default 0.7). One request with ``n=k`` when allowed
(``use_n`` True or None); on ``Unsupported(feature="n")`` (or ``use_n=False``) k concurrent
calls with seeds ``seed + i`` and sample indices ``i`` (so the response cache never collapses
them), noted in the vote. Each sample is read without a confidence; the majority letter wins;
confidence = majority count / valid samples.
**Tie rule**: an equal count is broken toward the letter of the first valid sample (sample
order = choice index, or call index), which is neutral between positions; a note says so.
No valid sample: invalid vote.
**Adaptive MP** (``adaptive: true``): the samples are drawn in rounds and the draw stops
early by the sequential rule of :mod:`judgefuse.judges.adaptive` (``samples`` is the
maximum); ``vote.samples`` holds the samples drawn and a note says
``"adaptive: stopped after k of K samples (reason, r rounds)"``.

Its own module because the three sampling paths (n, seeded calls, adaptive rounds) and their
fallbacks outweigh the other modes together; :mod:`judgefuse.judges.modes` re-exports
:func:`mp_vote`.
"""

from __future__ import annotations

import asyncio
import json
import time

from judgefuse.judges.adaptive import adaptive_note, sample_adaptively
from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.mode_calls import CallTally, chat_request, counted_call, describe_error, item_messages
from judgefuse.judges.transport.errors import BadRequest, TransportError, Unsupported
from judgefuse.judges.transport.request import ChatClient, Message
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.prompts import parse_judgment

__all__ = ["mp_vote"]


async def _one_sample(
    config: JudgeConfig, client: ChatClient, messages: list[Message], model: str | None, tally: CallTally, index: int
) -> str | TransportError:
    """Sample ``index`` as its own call (seed ``seed + index``); a transport failure is returned, not raised."""
    request = chat_request(config, model, messages, seed=config.seed + index, sample_index=index)
    try:
        response = await counted_call(client, request, tally)
    except TransportError as exc:
        return exc
    return response.texts[0] if response.texts else ""


async def _mp_texts_with_n(
    config: JudgeConfig, client: ChatClient, messages: list[Message], model: str | None, tally: CallTally
) -> list[str]:
    request = chat_request(config, model, messages, n=config.samples, seed=config.seed)
    response = await counted_call(client, request, tally)
    return list(response.texts)


async def _mp_texts_by_calls(
    config: JudgeConfig, client: ChatClient, messages: list[Message], model: str | None, tally: CallTally
) -> tuple[list[str | None], list[str]]:
    """k concurrent calls, sample i with seed ``seed + i``; (texts or None, per-sample errors)."""
    results = await asyncio.gather(
        *(_one_sample(config, client, messages, model, tally, i) for i in range(config.samples))
    )
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
    tally: CallTally,
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

    async def draw(start: int, count: int) -> list[Letter | None]:
        nonlocal use_n
        got: list[str | None] | None = None
        if use_n and count > 1:
            request = chat_request(config, model, messages, n=count, seed=config.seed + start)
            try:
                response = await counted_call(client, request, tally)
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
            results = await asyncio.gather(
                *(_one_sample(config, client, messages, model, tally, start + i) for i in range(count))
            )
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
    tally = CallTally()
    messages = item_messages("mp", item, config.prompt_style)
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
