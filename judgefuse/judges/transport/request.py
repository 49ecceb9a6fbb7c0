"""What a judge asks a chat model, what comes back, and the protocol every client follows.

``ChatRequest`` and ``ChatResponse`` are slotted frozen dataclasses, not pydantic models: they
are built once per call on the hot path and need no parsing, only the up-front checks below.
The API key is a :class:`pydantic.SecretStr`, so it never shows in a repr, a log line or an
error message.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import SecretStr

__all__ = [
    "ChatClient", "ChatRequest", "ChatResponse", "Message", "TopLogprobs", "constant_extra", "evolve",
    "is_constant_extra",
]

Message = dict[str, str]
"""One chat message: ``{"role": "system" | "user" | "assistant", "content": "..."}``."""

TopLogprobs = list[tuple[str, float]]
"""The top-k alternatives of one output token: ``[(token, logprob), ...]``, most likely first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """One chat-completion call.

    ``n`` asks for that many choices in one request (MP sampling). ``logprobs`` with
    ``top_logprobs`` asks for the top-k alternatives of each output token (the logprob mode
    reads the first). ``api_base``/``api_key`` override the client's own when set.
    ``extra`` is sent as additional top-level body fields. ``sample_index`` is never sent: it
    tells the response cache that two otherwise identical requests are different samples.
    """

    model: str
    messages: list[Message]
    temperature: float = 0.0
    max_tokens: int | None = None
    n: int = 1
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    api_base: str | None = None
    api_key: SecretStr | None = None
    timeout_s: float = 60.0
    extra: dict[str, Any] = field(default_factory=dict)
    sample_index: int = 0

    def __post_init__(self) -> None:
        if not self.model:
            raise ValueError("model must be a non-empty string")
        if not self.messages:
            raise ValueError("messages must not be empty")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ValueError(f"temperature must be finite and >= 0, got {self.temperature!r}")
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.top_logprobs is not None:
            if not self.logprobs:
                raise ValueError("top_logprobs needs logprobs=True")
            if not 0 <= self.top_logprobs <= 20:
                raise ValueError(f"top_logprobs must be in [0, 20], got {self.top_logprobs}")
        if not (math.isfinite(self.timeout_s) and self.timeout_s > 0):
            raise ValueError(f"timeout_s must be finite and > 0, got {self.timeout_s!r}")
        if self.sample_index < 0:
            raise ValueError(f"sample_index must be >= 0, got {self.sample_index}")
        if isinstance(self.api_key, str):  # accept a plain string, keep it secret from here on
            object.__setattr__(self, "api_key", SecretStr(self.api_key))


_FIELDS: tuple[str, ...] = ChatRequest.__slots__  # a slots dataclass: its fields, in order
_SETTERS: dict[str, Callable[[ChatRequest, Any], None]] = {
    name: getattr(ChatRequest, name).__set__ for name in _FIELDS  # the slots' own descriptors
}


def _straight_copy() -> Callable[[ChatRequest], ChatRequest]:
    """``copy(request)``: a new :class:`ChatRequest` with every slot set from ``request``, one
    line a field (generated from the fields, as ``dataclasses`` generates ``__init__``): ~2.5x
    faster than a loop of ``object.__setattr__``, which was ~3% of a judge call's CPU."""
    lines = [f"    _set_{name}(new, request.{name})" for name in _FIELDS]
    source = "def copy(request):\n    new = _new(_cls)\n" + "\n".join(lines) + "\n    return new\n"
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": ChatRequest}
    namespace.update({f"_set_{name}": setter for name, setter in _SETTERS.items()})
    exec(source, namespace)  # noqa: S102 - our own field names, nothing from outside
    return cast(Callable[[ChatRequest], ChatRequest], namespace["copy"])


_copy = _straight_copy()


def evolve(request: ChatRequest, **changes: Any) -> ChatRequest:
    """A copy of ``request`` with ``changes``, not validated again: only for changes known to
    be valid (an ``extra`` field added, a positive finite ``timeout_s``). On the judge call's
    hot path ``dataclasses.replace`` re-ran ``__post_init__`` for every call (~15 us each)."""
    unknown = changes.keys() - _SETTERS.keys()
    if unknown:
        raise TypeError(f"not fields of ChatRequest: {sorted(unknown)}")
    copy = _copy(request)
    for name, value in changes.items():
        _SETTERS[name](copy, value)
    return copy


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatResponse:
    """The answer to a :class:`ChatRequest`.

    ``texts`` has one entry per choice (``n`` of them). ``first_token_top_logprobs`` has one
    entry per choice too: the top-k of that choice's first output token, or an empty list when
    logprobs were not requested. Token counts and cost cover the whole call (all choices).
    ``cached`` is True when the answer came from a response cache rather than the provider.
    """

    texts: list[str]
    first_token_top_logprobs: list[TopLogprobs]
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cost_usd: float
    model: str
    cached: bool = False


@runtime_checkable
class ChatClient(Protocol):
    """Anything that can complete a chat request; the judges depend on this only."""

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send ``request``; raise a :class:`~.errors.TransportError` subclass on failure."""
        ...

    async def aclose(self) -> None:
        """Release connections; the client is unusable afterwards."""
        ...


_CONSTANT_EXTRAS: dict[int, dict[str, Any]] = {}
"""The ``extra`` dicts declared constant (:func:`constant_extra`), by identity; held here so an
id is never reused while it is in the table."""


def constant_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """Declare ``extra`` (one dict shared as the ``extra`` of many requests, e.g. the verdict's
    ``response_format``) never to be changed again, and return it. The direct client then
    encodes its JSON once, not on every call (:func:`~.direct.encode_body`): ~20 us of a
    judge call's CPU. Mutating it afterwards is a bug (the old JSON would still be sent)."""
    _CONSTANT_EXTRAS[id(extra)] = extra
    return extra


def is_constant_extra(extra: dict[str, Any]) -> bool:
    """Whether ``extra`` is a dict declared with :func:`constant_extra`."""
    return _CONSTANT_EXTRAS.get(id(extra)) is extra


def openai_body(request: ChatRequest) -> dict[str, Any]:
    """The OpenAI chat-completions parameters of ``request``: the direct client's JSON body and
    the litellm client's keyword arguments, so both paths send the same thing."""
    body: dict[str, Any] = {"model": request.model, "messages": request.messages, "temperature": request.temperature}
    if request.n != 1:
        body["n"] = request.n
    if request.max_tokens is not None:
        body["max_tokens"] = request.max_tokens
    if request.seed is not None:
        body["seed"] = request.seed
    if request.logprobs:
        body["logprobs"] = True
        if request.top_logprobs is not None:
            body["top_logprobs"] = request.top_logprobs
    if request.extra:
        body.update(request.extra)
    return body
