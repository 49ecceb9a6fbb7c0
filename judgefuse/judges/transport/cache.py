"""A response cache in front of any :class:`~.request.ChatClient`.

The key is a SHA-256 of everything that shapes the answer: model, messages, every sampling
parameter (temperature, max_tokens, n, seed, logprobs, top_logprobs, extra), api_base, and
the request's ``sample_index``, so the k samples of an MP judgment never collapse into one
cached answer. The API key is not part of the key. Errors are never cached: a failed call
stores nothing. A hit returns the stored response with ``cached=True``.

Two stores: :class:`LRUResponseCache` (in process, the default) and :class:`RedisResponseCache`
(shared by gateway replicas; it takes a ``redis.asyncio.Redis`` built by the caller).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

from judgefuse.json_input import parse_json
from judgefuse.judges.transport.request import ChatClient, ChatRequest, ChatResponse

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["CachingClient", "LRUResponseCache", "RedisResponseCache", "ResponseCache", "cache_key", "with_cache"]


log = logging.getLogger("judgefuse.cache")


def cache_key(request: ChatRequest) -> str:
    """The cache key of ``request`` (hex SHA-256 of its answer-shaping fields)."""
    material = {
        "model": request.model,
        "messages": request.messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
        "n": request.n,
        "seed": request.seed,
        "logprobs": request.logprobs,
        "top_logprobs": request.top_logprobs,
        "extra": request.extra,
        "api_base": request.api_base,
        "sample_index": request.sample_index,
    }
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


class ResponseCache(Protocol):
    """Storage for cached responses (in memory here; a Redis one can follow the same shape)."""

    async def get(self, key: str) -> ChatResponse | None: ...

    async def set(self, key: str, response: ChatResponse) -> None: ...


class LRUResponseCache:
    """An in-process LRU of at most ``maxsize`` responses."""

    def __init__(self, maxsize: int = 10_000) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._entries: OrderedDict[str, ChatResponse] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> ChatResponse | None:
        response = self._entries.get(key)
        if response is not None:
            self._entries.move_to_end(key)
        return response

    async def set(self, key: str, response: ChatResponse) -> None:
        self._entries[key] = response
        self._entries.move_to_end(key)
        while len(self._entries) > self.maxsize:
            self._entries.popitem(last=False)


def _encode(response: ChatResponse) -> bytes:
    return json.dumps(
        {
            "texts": response.texts,
            "first_token_top_logprobs": response.first_token_top_logprobs,
            "prompt_tokens": response.prompt_tokens,
            "completion_tokens": response.completion_tokens,
            "latency_s": response.latency_s,
            "cost_usd": response.cost_usd,
            "model": response.model,
        },
        separators=(",", ":"),
    ).encode()


def _decode(raw: bytes | str) -> ChatResponse | None:
    try:
        data: dict[str, Any] = parse_json(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        return ChatResponse(
            texts=[str(t) for t in data["texts"]],
            first_token_top_logprobs=[
                [(str(t), float(lp)) for t, lp in top] for top in data["first_token_top_logprobs"]
            ],
            prompt_tokens=int(data["prompt_tokens"]),
            completion_tokens=int(data["completion_tokens"]),
            latency_s=float(data["latency_s"]),
            cost_usd=float(data["cost_usd"]),
            model=str(data["model"]),
        )
    except (ValueError, KeyError, TypeError):  # JSONTextError and UnicodeDecodeError are ValueErrors
        return None  # an entry we cannot read (not UTF-8, not JSON, nested past the bound) is a miss


class RedisResponseCache:
    """Responses in Redis under ``{prefix}{key}``, expiring after ``ttl_s`` (None: never).

    An unreadable entry counts as a miss. Redis errors propagate (the caller decides whether a
    cache outage should fail the call); the client's lifecycle belongs to the caller.
    """

    def __init__(
        self,
        client: Redis,
        *,
        ttl_s: float | None = 7 * 24 * 3600,
        prefix: str = "judgefuse:resp:",
        fail_open: bool = False,
    ) -> None:
        if ttl_s is not None and ttl_s <= 0:
            raise ValueError(f"ttl_s must be > 0 or None, got {ttl_s}")
        self.client = client
        self.ttl_s = ttl_s
        self.prefix = prefix
        self.fail_open = fail_open
        """True: a Redis error is a miss (get) or a skipped write (set), logged, never a failed
        judge call. The gateway sets it: a cache outage must cost money, not verdicts."""
        self.errors = 0

    async def get(self, key: str) -> ChatResponse | None:
        try:
            raw = await self.client.get(self.prefix + key)
        except Exception as exc:  # redis errors: connection, timeout, response
            self._failed("get", exc)
            return None
        return None if raw is None else _decode(raw)

    async def set(self, key: str, response: ChatResponse) -> None:
        px = None if self.ttl_s is None else max(1, int(self.ttl_s * 1000))
        try:
            await self.client.set(self.prefix + key, _encode(response), px=px)
        except Exception as exc:
            self._failed("set", exc)

    def _failed(self, operation: str, exc: Exception) -> None:
        if not self.fail_open:
            raise exc
        self.errors += 1
        log.warning("response cache %s failed (%s): treated as a miss", operation, type(exc).__name__)


class CachingClient:
    """A :class:`ChatClient` that answers from ``cache`` when it can; build with :func:`with_cache`."""

    def __init__(self, inner: ChatClient, cache: ResponseCache) -> None:
        self.inner = inner
        self.cache = cache
        self.hits = 0
        self.misses = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """The cached answer to ``request``, or ``inner``'s (stored only when it succeeded)."""
        key = cache_key(request)
        found = await self.cache.get(key)
        if found is not None:
            self.hits += 1
            return dataclasses.replace(found, cached=True)
        self.misses += 1
        response = await self.inner.complete(request)
        await self.cache.set(key, response)
        return response

    async def aclose(self) -> None:
        """Close the wrapped client."""
        await self.inner.aclose()


def with_cache(client: ChatClient, cache: ResponseCache | None = None) -> CachingClient:
    """Put ``cache`` (a fresh :class:`LRUResponseCache` by default) in front of ``client``."""
    return CachingClient(client, cache if cache is not None else LRUResponseCache())
