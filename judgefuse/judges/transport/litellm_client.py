"""The litellm path: every provider that does not speak the OpenAI protocol directly.

litellm is imported on first use (it takes seconds to import). Before importing it we set
``LITELLM_LOCAL_MODEL_COST_MAP=True`` (unless the environment already chose), so litellm reads
the price table it ships instead of fetching one from GitHub at import time, and we turn off
its "give feedback" printing. Retries are ours (``max_retries=0``). The client passes litellm
one aiohttp session of its own (``shared_session``) so no per-call sessions are left behind.

Exception mapping, learned from litellm 1.106 against a real server: for the ``openai/``
provider with a custom ``api_base``, litellm raises ``BadRequestError`` for *every* HTTP error
except 429 (401, 404, 500, 503 alike) but keeps the true ``status_code``; a dropped connection
and an unreadable body both surface as ``InternalServerError`` (500). So the mapping walks the
exception chain by type first (timeout, the HTTP status error, connection errors, decoding
errors) and falls back to ``status_code``; it never reads message text. A status the server
sent is read first: under openai 3.x litellm turns a provider's 408 and 504 into its
``Timeout`` type, which would otherwise read as "no response". The mapping is tested under the
locked openai (3.x) and the oldest and newest 2.x the ranges admit
(``tests/judges/test_openai_versions.py``).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import time
import warnings
from collections.abc import Iterator
from typing import Any

import aiohttp
import httpx
from pydantic import SecretStr

from judgefuse.judges.transport import pricing
from judgefuse.judges.transport.errors import (
    BadRequest,
    ConnectionFailed,
    FatalError,
    JudgeTimeout,
    MalformedResponse,
    TransportError,
    Unsupported,
    error_for_status,
    parse_retry_after,
    redact,
)
from judgefuse.judges.transport.redaction import scrub_response, scrubber_for
from judgefuse.judges.transport.request import (
    ChatRequest,
    ChatResponse,
    TopLogprobs,
    is_constant_extra,
    openai_body,
)

__all__ = ["LiteLLMClient", "import_litellm"]

_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router")
_warmed = False


def import_litellm() -> Any:
    """Import litellm offline and quiet (see the module docstring); returns the module."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    if hasattr(litellm, "telemetry"):
        litellm.telemetry = False
    global _warmed
    if not _warmed:
        # The first ModelResponse() makes pydantic build litellm's response schemas, which warns
        # (UserWarning: TypedDict items with the ``ReadOnly`` qualifier) inside acompletion, where
        # litellm would turn a warnings-as-errors run into an APIConnectionError. Build it here.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*ReadOnly.*", category=UserWarning)
            litellm.ModelResponse()
        _warmed = True
    return litellm


class _RedactSecrets(logging.Filter):
    """Scrubs the keys of live clients out of litellm's log records."""

    def __init__(self) -> None:
        super().__init__("judgefuse-redact")
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            cleaned = scrubber_for(*sorted(self.secrets)).scrub(message)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


_redactor = _RedactSecrets()


def _install_redactor() -> None:
    for name in _LITELLM_LOGGERS:
        logger = logging.getLogger(name)
        if _redactor not in logger.filters:
            logger.addFilter(_redactor)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _scrub(exc: BaseException, secret: str | None) -> None:
    """Remove ``secret`` (and its encodings) from the text of every exception in ``exc``'s chain, in place."""
    scrubber = scrubber_for(secret)
    if not scrubber:
        return
    for link in _chain(exc):
        link.args = tuple(scrubber.scrub(a) if isinstance(a, str) else a for a in link.args)
        for attr in ("message", "detail"):
            value = getattr(link, attr, None)
            if isinstance(value, str):
                cleaned = scrubber.scrub(value)
                if cleaned != value:
                    with contextlib.suppress(AttributeError):
                        setattr(link, attr, cleaned)
        body = getattr(link, "body", None)
        if isinstance(body, dict) and isinstance(body.get("message"), str):
            body["message"] = scrubber.scrub(body["message"])


def _body_param_and_message(exc: BaseException) -> tuple[str | None, str]:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = body.get("error")
        error: dict[str, Any] = inner if isinstance(inner, dict) else body
        param = error.get("param")
        return (param if isinstance(param, str) else None), str(error.get("message") or "")
    return None, ""


def _sent_status(chain: list[BaseException]) -> int | None:
    """The HTTP status the server sent, read from the HTTP layer's own exceptions in ``chain``
    (httpx's ``HTTPStatusError``, else the openai SDK's ``APIStatusError``, which carries the
    response it was built from); None when no response arrived. litellm's own exceptions are
    not read here: they set ``status_code`` by kind (408 on any timeout, 500 on a dropped
    connection), not from a response."""
    import openai

    for link in chain:
        if isinstance(link, httpx.HTTPStatusError):
            return link.response.status_code
    for link in chain:
        if isinstance(link, openai.APIStatusError) and type(link).__module__.startswith("openai"):
            return link.status_code
    return None


def map_litellm_error(exc: Exception, *, model: str, timeout_s: float, secret: str | None) -> TransportError:
    """The :mod:`.errors` exception for an exception raised by ``litellm.acompletion``."""
    import litellm
    import openai
    from litellm.llms.base_llm.chat.transformation import BaseLLMException

    _scrub(exc, secret)
    chain = list(_chain(exc))
    # A status the server really sent wins over every wrapper's opinion: litellm wraps a
    # provider's 408 and 504 as ``litellm.Timeout`` (an ``openai.APITimeoutError``) under
    # openai 3.x but not under 2.x, so "is it a timeout type?" must come second.
    status = _sent_status(chain)
    if status is None and any(
        isinstance(link, (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)) for link in chain
    ):
        return JudgeTimeout(f"no response from {model!r} within {timeout_s:g}s")
    if status is None:
        if any(
            isinstance(link, (openai.APIConnectionError, httpx.TransportError, aiohttp.ClientError, ConnectionError))
            for link in chain
        ):
            return ConnectionFailed(f"connection to {model!r} failed")
        # The SDK's own base class (not an API error): refused before sending, e.g. no key.
        if any(type(link) is openai.OpenAIError for link in chain):
            return BadRequest(f"{model!r}: the client refused the request: {redact(str(chain[-1]), secret)}")
        if isinstance(exc, litellm.UnsupportedParamsError):
            return Unsupported(f"{model!r}: {redact(str(exc), secret)}", feature="params", status=400)
        # No HTTP error status anywhere, and something under the outer exception failed while
        # decoding what the server sent (a 2xx body that is not a chat completion).
        if any(isinstance(link, (ValueError, litellm.APIError, BaseLLMException)) for link in chain[1:]):
            return MalformedResponse(f"{model!r} returned a body that is not a chat completion")
        status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        param, message = _body_param_and_message(exc)
        headers = getattr(exc, "litellm_response_headers", None)
        retry_after = headers.get("retry-after") if isinstance(headers, httpx.Headers | dict) else None
        detail = redact(message or type(exc).__name__, secret)
        return error_for_status(status, detail, retry_after_s=parse_retry_after(retry_after), param=param)
    return FatalError(f"{model!r}: unclassified litellm error {type(exc).__name__}: {redact(str(exc), secret)[:300]}")


def _first_token_top(choice: Any) -> TopLogprobs:
    logprobs = getattr(choice, "logprobs", None)
    content = getattr(logprobs, "content", None) if logprobs is not None else None
    if not content:
        return []
    first = content[0]
    top = getattr(first, "top_logprobs", None)
    if not top:
        return [(first.token, float(first.logprob))]
    return [(alt.token, float(alt.logprob)) for alt in top]


class LiteLLMClient:
    """``litellm.acompletion`` behind the :class:`~.request.ChatClient` protocol.

    ``api_base``/``api_key`` are defaults a request's own fields override. Model names are
    litellm's (``"anthropic/claude-..."``; ``"openai/<name>"`` with ``api_base`` for an
    OpenAI-compatible server). ``max_connections`` caps this client's shared aiohttp session.
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
        self._litellm = import_litellm()
        _install_redactor()
        self._api_base = api_base
        self._api_key = SecretStr(api_key) if isinstance(api_key, str) else api_key
        if self._api_key is not None:
            _redactor.secrets.add(self._api_key.get_secret_value())
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"LiteLLMClient(api_base={self._api_base!r}, max_connections={self._max_connections})"

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            if self._closed:
                raise RuntimeError("LiteLLMClient is closed")
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self._max_connections))
        return self._session

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Send one request through litellm; see :class:`~.request.ChatClient`."""
        key = request.api_key or self._api_key
        secret = key.get_secret_value() if key is not None else None
        if secret:
            _redactor.secrets.add(secret)
        body = openai_body(request)
        if is_constant_extra(request.extra):  # one dict shared by many calls: litellm's provider
            body.update(copy.deepcopy(request.extra))  # code may edit what it is given
        kwargs: dict[str, Any] = {
            **body,
            "timeout": request.timeout_s,
            "max_retries": 0,
            "shared_session": self._get_session(),
        }
        api_base = request.api_base or self._api_base
        if api_base:
            kwargs["api_base"] = api_base
        if secret:
            kwargs["api_key"] = secret
        started = time.perf_counter()
        try:
            response = await self._litellm.acompletion(**kwargs)
        except Exception as exc:  # every litellm failure leaves as one of ours
            raise map_litellm_error(exc, model=request.model, timeout_s=request.timeout_s, secret=secret) from exc
        latency = time.perf_counter() - started
        try:
            choices = sorted(response.choices, key=lambda c: c.index or 0)
            texts = [c.message.content if isinstance(c.message.content, str) else "" for c in choices]
            tops: list[TopLogprobs] = []
            missing_logprobs = False
            for choice in choices:
                if request.logprobs:
                    if getattr(choice, "logprobs", None) is None:
                        missing_logprobs = True
                    tops.append(_first_token_top(choice))
                else:
                    tops.append([])
            usage = getattr(response, "usage", None)
            prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
            completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
        except (AttributeError, TypeError, ValueError, IndexError) as exc:
            raise MalformedResponse(f"{request.model!r}: unreadable litellm response ({type(exc).__name__})") from exc
        if not texts:
            raise MalformedResponse(f"{request.model!r}: response has no choices")
        if missing_logprobs:
            raise Unsupported(f"model {request.model!r} returned no logprobs", feature="logprobs")
        result = ChatResponse(
            texts=texts,
            first_token_top_logprobs=tops,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            latency_s=latency,
            cost_usd=pricing.cost_usd(request.model, prompt_tokens, completion_tokens),
            model=str(getattr(response, "model", None) or request.model),
        )
        return scrub_response(result, secret)  # below the response cache: it never stores a key

    async def aclose(self) -> None:
        """Close this client's session (litellm's own cached clients are process-wide)."""
        self._closed = True
        session, self._session = self._session, None
        if session is not None:
            await session.close()
