"""Structured outputs for SC and the fuser: ask for the verdict schema, fall back once, remember.

Where the backend supports it, an SC (or fuser) request carries ``response_format`` with the
verdict's JSON schema (:func:`~judgefuse.prompts.verdict_schema.verdict_response_format`), so the
reply is always readable. A backend that refuses it (an HTTP 4xx naming ``response_format``,
i.e. :class:`~.transport.errors.Unsupported` with that feature) gets today's prompt-and-parse
request at once, and the judge remembers: later calls of the same judge and model skip the
attempt (one wasted call per judge and process, not one per vote). The parser stays in every
case, for providers without structured outputs.

``structured_output: false`` on a judge turns it off.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.errors import Unsupported
from judgefuse.judges.transport.request import ChatRequest, ChatResponse, constant_extra, evolve
from judgefuse.prompts.verdict_schema import verdict_response_format

FEATURE = "response_format"

_CONSTRAINED = constant_extra({FEATURE: verdict_response_format()})
"""The ``extra`` of a constrained request that had none: one dict, encoded once by the direct
client (:func:`~judgefuse.judges.transport.request.constant_extra`)."""

_refused: set[tuple[str, str]] = set()
"""(judge name, model) pairs whose backend refused ``response_format``."""


def remembered_refusal(judge: str, model: str) -> bool:
    return (judge, model) in _refused


def forget_refusals() -> None:
    """Clear the memory (tests; a backend upgraded in place)."""
    _refused.clear()


async def call_structured(
    config: JudgeConfig,
    request: ChatRequest,
    send: Callable[[ChatRequest], Awaitable[ChatResponse]],
) -> tuple[ChatResponse, list[str]]:
    """``send(request)`` constrained to the verdict schema when possible; (response, notes).

    Other transport errors propagate unchanged (the caller turns them into an invalid vote)."""
    key = (config.name, request.model)
    if not config.structured_output or key in _refused:
        return await send(request), []
    extra = {**request.extra, FEATURE: verdict_response_format()} if request.extra else _CONSTRAINED
    constrained = evolve(request, extra=extra)
    try:
        return await send(constrained), []
    except Unsupported as exc:
        if exc.feature != FEATURE:
            raise
        _refused.add(key)
        note = "structured output refused by the backend: fell back to prompt-and-parse (remembered)"
        return await send(request), [note]
