"""How judges talk to models: one :class:`ChatClient` protocol, two implementations, wrappers.

* :class:`DirectOpenAIClient`: aiohttp straight to an OpenAI-compatible endpoint (the hot path).
* :class:`LiteLLMClient`: litellm for every other provider (litellm is imported on first use).
* :func:`with_retries`, :func:`with_cache`: wrappers that keep the same protocol.

Every failure is a :class:`TransportError`; see :mod:`.errors` for the tree.

:class:`DirectOpenAIClient` and :class:`LiteLLMClient` are loaded on first use (PEP 562): their
HTTP/1.1 parser (httptools), aiohttp and litellm are the ``judges`` extra, and ``pip install judgefuse`` (the client and the offline
engine) must start without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from judgefuse.judges.transport.cache import (
    CachingClient,
    LRUResponseCache,
    RedisResponseCache,
    ResponseCache,
    cache_key,
    with_cache,
)
from judgefuse.judges.transport.errors import (
    AuthenticationFailed,
    BadRequest,
    ConnectionFailed,
    FatalError,
    JudgeTimeout,
    MalformedResponse,
    RateLimited,
    RetryableError,
    ServerError,
    TransportError,
    Unsupported,
)
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse, Message, TopLogprobs
from judgefuse.judges.transport.retry import RetryingClient, with_retries

if TYPE_CHECKING:
    from judgefuse.judges.transport.direct import DirectOpenAIClient
    from judgefuse.judges.transport.litellm_client import LiteLLMClient

_LAZY = {
    "DirectOpenAIClient": "judgefuse.judges.transport.direct",
    "LiteLLMClient": "judgefuse.judges.transport.litellm_client",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "CachingClient",
    "ChatClient",
    "ChatRequest",
    "ChatResponse",
    "ConnectionFailed",
    "DirectOpenAIClient",
    "FatalError",
    "JudgeTimeout",
    "LRUResponseCache",
    "LiteLLMClient",
    "MalformedResponse",
    "Message",
    "RateLimited",
    "RedisResponseCache",
    "ResponseCache",
    "RetryableError",
    "RetryingClient",
    "ServerError",
    "TopLogprobs",
    "TransportError",
    "Unsupported",
    "cache_key",
    "with_cache",
    "with_retries",
]
