"""How judges talk to models: one :class:`ChatClient` protocol, two implementations, wrappers.

* :class:`DirectOpenAIClient`: aiohttp straight to an OpenAI-compatible endpoint (the hot path).
* :class:`LiteLLMClient`: litellm for every other provider (litellm is imported on first use).
* :func:`with_retries`, :func:`with_cache`: wrappers that keep the same protocol.

Every failure is a :class:`TransportError`; see :mod:`.errors` for the tree.
"""

from judgefuse.judges.transport.cache import (
    CachingClient,
    LRUResponseCache,
    RedisResponseCache,
    ResponseCache,
    cache_key,
    with_cache,
)
from judgefuse.judges.transport.direct import DirectOpenAIClient
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
from judgefuse.judges.transport.litellm_client import LiteLLMClient
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse, Message, TopLogprobs
from judgefuse.judges.transport.retry import RetryingClient, with_retries

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
