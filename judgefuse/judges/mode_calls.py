"""Plumbing every elicitation mode shares: request building, call counting, error text.

Split from :mod:`judgefuse.judges.modes` so the MP sampler (:mod:`.mp_sampling`) and the
position swap (:mod:`.position_swap`) can use it without importing the modes module (which
imports them).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Any, Protocol

from judgefuse.judges.config import JudgeConfig
from judgefuse.judges.transport.errors import TransportError
from judgefuse.judges.transport.request import (
    ChatClient,
    ChatRequest,
    ChatResponse,
    Message,
)
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.prompts import render_messages

__all__ = ["CallTally", "ModeFunction", "chat_request", "counted_call", "describe_error", "item_messages"]


class ModeFunction(Protocol):
    def __call__(
        self, config: JudgeConfig, client: ChatClient, item: PairwiseItem, *, model: str | None = None
    ) -> Awaitable[JudgeVote]: ...


def describe_error(exc: BaseException) -> str:
    """``"RateLimited: HTTP 429: ..."``: the class and the (already redacted) message."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


@dataclass
class CallTally:
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


async def counted_call(client: ChatClient, request: ChatRequest, tally: CallTally) -> ChatResponse:
    """``client.complete``; counts the call whether it succeeds or raises a TransportError."""
    try:
        response = await client.complete(request)
    except TransportError:
        tally.calls += 1
        raise
    tally.add(response)
    return response


def item_messages(mode: str, item: PairwiseItem, style: str = "delimited") -> list[Message]:
    """The prompt of one call in ``mode``, in the judge's prompt ``style``."""
    return render_messages(
        mode, question=item.question, answer_a=item.answer_a, answer_b=item.answer_b, style=style
    )


def chat_request(config: JudgeConfig, model: str | None, messages: list[Message], **fields: Any) -> ChatRequest:
    """The request of one call; ``model`` overrides the config's (a served local model's name)."""
    wire_model = model or config.model
    if wire_model is None:
        raise ValueError(f"judge {config.name!r} is external (no model): its votes are posted, not asked for")
    # JudgeConfig fills temperature per mode on validation; 0 covers a config built unvalidated
    fields.setdefault("temperature", config.temperature if config.temperature is not None else 0.0)
    fields.setdefault("max_tokens", config.max_tokens)
    return ChatRequest(model=wire_model, messages=messages, timeout_s=config.timeout_s, **fields)
