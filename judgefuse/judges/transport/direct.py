"""A lean client for endpoints that speak the OpenAI chat-completions protocol.

This is the hot path (docs/design.md, 'Serving'): one :class:`~.http1.HTTPClient` per client
(keep-alive connections, a cap on requests in flight; 0.11 ms of CPU a call where aiohttp's
client took 0.19 at 50 in flight), the request body built as a plain dict, the response read with the stdlib ``json``
(or ``orjson`` when installed), and only the fields we use picked out of it. Every failure
leaves as a :mod:`.errors` exception, mapped by exception type or HTTP status.

The model name is sent verbatim (no litellm-style ``openai/`` prefix stripping: vLLM serves
models called ``openai/gpt-oss-20b``).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import SecretStr

from judgefuse.judges.transport import pricing
from judgefuse.judges.transport.errors import (
    ConnectionFailed,
    JudgeTimeout,
    MalformedResponse,
    Unsupported,
    error_for_status,
    parse_retry_after,
    redact,
)
from judgefuse.judges.transport.http1 import ConnectionBroken, HTTPClient
from judgefuse.judges.transport.redaction import scrub_response, scrubber_for
from judgefuse.judges.transport.request import (
    ChatRequest,
    ChatResponse,
    TopLogprobs,
    is_constant_extra,
    openai_body,
)

try:  # orjson is a dependency (the votes reader's decoder); the stdlib's json where an install lacks it
    import orjson as _orjson

    _loads = _orjson.loads

    def _dumps(value: Any) -> bytes:
        return _orjson.dumps(value)

except ImportError:  # pragma: no cover - depends on the environment
    import json as _json

    _loads = _json.loads
    _encode = _json.JSONEncoder(separators=(",", ":")).encode  # json.dumps with separators
    # builds a new encoder on every call

    def _dumps(value: Any) -> bytes:
        return _encode(value).encode()


__all__ = ["DirectOpenAIClient", "encode_body", "parse_body"]

_MESSAGES_CACHE_SIZE = 128
_MESSAGES_CACHE_MAX_CHARS = 16_384
_encoded_messages: dict[tuple[str, ...], bytes] = {}
"""The JSON of recent prompts (``messages``), by their roles and texts. A panel's judges of one
mode send the same rendered prompt for an item (the renderer hands each the same strings), so
of a five-judge panel's five encodings of ~1.5 KB (~30 us each) four are a lookup. Bounded:
at most ``_MESSAGES_CACHE_SIZE`` prompts, each at most ``_MESSAGES_CACHE_MAX_CHARS``; the
oldest goes first."""


def _messages_key(messages: Any) -> tuple[str, ...] | None:
    """(role, content, role, content, ...) of plain text messages; None for anything else
    (other keys, non-text content, a long prompt): those are encoded as they are."""
    key: list[str] = []
    size = 0
    for message in messages:
        if type(message) is not dict or len(message) != 2:
            return None
        role, content = message.get("role"), message.get("content")
        if type(role) is not str or type(content) is not str:
            return None
        size += len(content)
        key += (role, content)
    return tuple(key) if size <= _MESSAGES_CACHE_MAX_CHARS else None


_encoded_rests: dict[tuple[object, ...], bytes] = {}
"""The JSON of recent bodies' fields after ``messages`` (temperature, max_tokens, ... and a
constant ``extra``: the verdict's ``response_format``, ~20 us to encode on every call), by
their keys, their values' ``repr`` and the extra's identity. Bounded like ``_encoded_messages``."""
_SCALARS = (float, int, bool, str, type(None))


def _rest_key(rest: dict[str, Any], extra: dict[str, Any]) -> tuple[object, ...] | None:
    """The memo key of ``rest`` (the body after ``messages``: the request's own fields, then
    ``extra``'s): None unless ``extra`` is empty or declared constant (``constant_extra``) and
    every own field is a plain scalar (whose ``repr`` tells its JSON)."""
    if not extra:
        own = tuple(rest.values())
    elif is_constant_extra(extra):
        own = tuple([value for name, value in rest.items() if name not in extra])
    else:
        return None
    for value in own:
        if type(value) not in _SCALARS:
            return None
    return tuple(rest), repr(own), id(extra)


def _memo(cache: dict[Any, bytes], key: Any, value: Any) -> bytes:
    """``_dumps(value)``, kept under ``key`` in ``cache`` (the oldest entry goes first)."""
    encoded = cache.get(key)
    if encoded is None:
        encoded = _dumps(value)
        if len(cache) >= _MESSAGES_CACHE_SIZE:
            cache.pop(next(iter(cache)), None)
        cache[key] = encoded
    return encoded


def encode_body(request: ChatRequest) -> bytes:
    """The JSON body of ``request`` (the bytes ``_dumps(openai_body(request))`` gives), its
    ``messages`` encoded once for every judge that sends the same prompt (``_encoded_messages``)
    and the fields after them once for every call with the same ones (``_encoded_rests``)."""
    body = openai_body(request)
    messages = body["messages"]
    key = _messages_key(messages) if messages is request.messages else None
    if key is None:
        return _dumps(body)
    encoded = _memo(_encoded_messages, key, messages)
    del body["messages"]
    model = _dumps(body.pop("model"))
    rest_key = _rest_key(body, request.extra)  # the fields after messages, in order
    rest = _dumps(body) if rest_key is None else _memo(_encoded_rests, rest_key, body)
    return b'{"model":' + model + b',"messages":' + encoded + (b"," + rest[1:] if len(rest) > 2 else b"}")

_JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def _first_token_top(logprobs: Any) -> TopLogprobs:
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return []
    first = content[0]
    top = first.get("top_logprobs") if isinstance(first, dict) else None
    if not top:  # top_logprobs=0 or absent: the sampled token alone
        return [(first["token"], float(first["logprob"]))]
    return [(alt["token"], float(alt["logprob"])) for alt in top]


def parse_body(data: Any, request: ChatRequest) -> tuple[list[str], list[TopLogprobs], int, int, str]:
    """(texts, first-token top logprobs, prompt tokens, completion tokens, model) of a body.

    Raises :class:`MalformedResponse` when the body is not a chat completion, and
    :class:`Unsupported` when logprobs were asked for and the endpoint sent none.
    """
    try:
        choices = data["choices"]
        if not isinstance(choices, list) or not choices:
            raise MalformedResponse("response has no choices")
        texts: list[str] = []
        tops: list[TopLogprobs] = []
        missing_logprobs = False
        for choice in sorted(choices, key=lambda c: c.get("index", 0)):
            content = choice["message"].get("content")
            texts.append(content if isinstance(content, str) else "")
            if request.logprobs:
                logprobs = choice.get("logprobs")
                if logprobs is None:
                    missing_logprobs = True
                tops.append(_first_token_top(logprobs))
            else:
                tops.append([])
        usage = data.get("usage") or {}
        prompt_tokens = int(usage.get("prompt_tokens") or 0)
        completion_tokens = int(usage.get("completion_tokens") or 0)
        model = data.get("model") or request.model
    except MalformedResponse:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise MalformedResponse(f"not a chat completion ({type(exc).__name__} while reading the body)") from exc
    if missing_logprobs:
        raise Unsupported(f"model {request.model!r} returned no logprobs", feature="logprobs")
    return texts, tops, prompt_tokens, completion_tokens, str(model)


_BODY_EXCERPT = 80


def _body_excerpt(raw: bytes, secret: str | None) -> str:
    """The first characters of a body that is not JSON, redacted *before* the cut.

    Only a bounded head of the body is decoded (the cut plus the scrubber's margin), so a
    multi-megabyte body costs no more than a short one.
    """
    scrubber = scrubber_for(secret)
    head = raw[: 4 * (_BODY_EXCERPT + scrubber.margin)].decode("utf-8", "replace")
    return redact(head, secret, limit=_BODY_EXCERPT)


def _error_detail(raw: bytes, secret: str | None) -> tuple[str, str | None]:
    """(redacted message, error.param) from an error body, tolerating any shape."""
    try:
        data = _loads(raw)
    except ValueError:
        return redact(raw.decode("utf-8", "replace"), secret), None
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict):
        param = error.get("param")
        return redact(str(error.get("message", "")), secret), param if isinstance(param, str) else None
    return redact(str(data), secret), None


class DirectOpenAIClient:
    """POST ``{api_base}/chat/completions``; see the module docstring.

    ``api_base`` and ``api_key`` are defaults that a request's own fields override.
    ``max_connections`` caps concurrent connections (the per-provider concurrency cap).
    The connections are made on first use inside the running event loop; call :meth:`aclose`.
    """

    def __init__(
        self,
        *,
        api_base: str | None = None,
        api_key: SecretStr | str | None = None,
        max_connections: int = 100,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self._api_base = api_base
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        self._max_connections = max_connections
        self._http: HTTPClient | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"DirectOpenAIClient(api_base={self._api_base!r}, max_connections={self._max_connections})"

    def _get_http(self) -> HTTPClient:
        http = self._http
        if http is None:
            if self._closed:
                raise RuntimeError("DirectOpenAIClient is closed")
            http = self._http = HTTPClient(max_connections=self._max_connections)
        return http

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send one chat-completions request; see :class:`~.request.ChatClient`."""
        api_base = request.api_base or self._api_base
        if not api_base:
            raise ValueError("no api_base: set it on the client or the request")
        key = request.api_key or self._api_key
        secret = key.get_secret_value() if key is not None else None
        headers = {**_JSON_HEADERS, "Authorization": f"Bearer {secret}"} if secret else _JSON_HEADERS
        url = api_base.rstrip("/") + "/chat/completions"
        http = self._get_http()
        started = time.perf_counter()
        try:
            response = await http.request("POST", url, encode_body(request), headers=headers,
                                          timeout_s=request.timeout_s)
        except TimeoutError as exc:
            raise JudgeTimeout(f"no response from {request.model!r} within {request.timeout_s:g}s") from exc
        except OSError as exc:  # could not connect; broken; not HTTP; an answer over the size cap
            if isinstance(exc, ConnectionBroken) and exc.body_started:
                raise ConnectionFailed(f"connection to {request.model!r} broke while reading the body") from exc
            raise ConnectionFailed(
                f"connection to {request.model!r} failed ({type(exc).__name__}): {redact(str(exc), secret)}"
            ) from exc
        latency = time.perf_counter() - started
        status, raw = response.status, response.body
        if status >= 300:
            detail, param = _error_detail(raw, secret)
            retry_after = response.headers.get("retry-after") if status == 429 else None
            raise error_for_status(status, detail, retry_after_s=parse_retry_after(retry_after), param=param)
        try:
            data = _loads(raw)
        except ValueError as exc:
            raise MalformedResponse(
                f"HTTP {status} body is not JSON: {_body_excerpt(raw, secret)!r}", status=status
            ) from exc
        texts, tops, prompt_tokens, completion_tokens, model = parse_body(data, request)
        answer = ChatResponse(
            texts=texts,
            first_token_top_logprobs=tops,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            cost_usd=pricing.cost_usd(request.model, prompt_tokens, completion_tokens),
            model=model,
        )
        return scrub_response(answer, secret) if secret else answer  # below the response cache: it never stores a key

    async def aclose(self) -> None:
        """Close the client and its connections."""
        self._closed = True
        http, self._http = self._http, None
        if http is not None:
            await http.aclose()
