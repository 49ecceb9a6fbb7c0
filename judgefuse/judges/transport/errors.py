"""The exceptions every chat client raises, whatever library sits underneath.

Hierarchy::

    TransportError                  anything that went wrong talking to a judge model
    ├── RetryableError              worth another attempt (the retry layer retries these only)
    │   ├── RateLimited             HTTP 429; ``retry_after_s`` from Retry-After when given
    │   ├── ServerError             HTTP 5xx, and 409 (a provider-side conflict/lock); ``status``
    │   ├── JudgeTimeout            no complete answer in time: client timeout or HTTP 408
    │   └── ConnectionFailed        refused, reset or closed before a response was read
    └── FatalError                  the same request will fail again: do not retry
        ├── AuthenticationFailed    HTTP 401 / 403
        ├── BadRequest              any other 4xx (400, 404 unknown model, 422, ...)
        │   └── Unsupported         the endpoint lacks a feature we asked for (``n`` > 1,
        │                           logprobs); ``feature`` names it
        └── MalformedResponse       a 2xx whose body is not a chat completion we can read

Each client maps its own library's exceptions here at the boundary (``raise ... from exc``),
by exception type or HTTP status, never by matching message text. Messages never carry the
API key: :func:`redact` scrubs a secret, and its base64/hex/URL-escaped forms, out of any text
taken from the server *before* cutting it (:mod:`.redaction`).
"""

from __future__ import annotations

import datetime as _dt
from email.utils import parsedate_to_datetime

from judgefuse.errors import JudgefuseError
from judgefuse.judges.transport.redaction import scrubber_for

__all__ = [
    "AuthenticationFailed",
    "BadRequest",
    "ConnectionFailed",
    "FatalError",
    "JudgeTimeout",
    "MalformedResponse",
    "RateLimited",
    "RetryableError",
    "ServerError",
    "TransportError",
    "Unsupported",
    "error_for_status",
    "parse_retry_after",
    "redact",
]

#: Request parameters whose rejection means "this endpoint does not support the feature".
UNSUPPORTED_PARAMS = frozenset({"n", "logprobs", "top_logprobs", "seed", "response_format"})
_MAX_DETAIL = 300


class TransportError(JudgefuseError):
    """Base class: a judge call failed. ``status`` is the HTTP status when there was one."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r}, status={self.status!r})"


class RetryableError(TransportError):
    """A failure that may succeed on another attempt."""


class RateLimited(RetryableError):
    """HTTP 429. ``retry_after_s`` is the server's requested wait, if it sent one."""

    def __init__(self, message: str, *, retry_after_s: float | None = None, status: int | None = 429) -> None:
        super().__init__(message, status=status)
        self.retry_after_s = retry_after_s


class ServerError(RetryableError):
    """HTTP 5xx (or 409): the provider failed; ``status`` says how."""


class JudgeTimeout(RetryableError):
    """The call did not complete within its timeout (client-side, or HTTP 408)."""


class ConnectionFailed(RetryableError):
    """The connection was refused, reset or closed before a response was read."""


class FatalError(TransportError):
    """A failure that retrying the same request will not fix."""


class AuthenticationFailed(FatalError):
    """HTTP 401/403: the key is missing, wrong, or not allowed this model."""


class BadRequest(FatalError):
    """The provider refused the request (4xx other than 401/403/408/409/429)."""


class Unsupported(BadRequest):
    """The endpoint does not support ``feature`` (e.g. ``"n"`` or ``"logprobs"``)."""

    def __init__(self, message: str, *, feature: str, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.feature = feature


class MalformedResponse(FatalError):
    """A successful status with a body that is not a readable chat completion."""


def redact(text: str, secret: str | None, *, limit: int = _MAX_DETAIL) -> str:
    """``text`` with ``secret`` and its encodings replaced, then cut to ``limit`` characters.

    Redacting comes first, so a cut can never leave part of a key behind; a key prefix the
    source itself truncated is removed from the end of the cut too (:meth:`SecretScrubber.cut`).
    """
    clean, was_cut = scrubber_for(secret).cut(text, limit)
    return clean + "..." if was_cut else clean


def error_for_status(
    status: int,
    detail: str,
    *,
    retry_after_s: float | None = None,
    param: str | None = None,
) -> TransportError:
    """The exception for an HTTP error ``status``; ``detail`` must already be redacted.

    ``param`` is the provider's structured ``error.param`` (OpenAI error bodies name the
    offending parameter there); a rejected ``n``/``logprobs``/... becomes :class:`Unsupported`.
    """
    message = f"HTTP {status}: {detail}" if detail else f"HTTP {status}"
    if status == 429:
        return RateLimited(message, retry_after_s=retry_after_s, status=status)
    if status == 408:
        return JudgeTimeout(message, status=status)
    if status >= 500 or status == 409:
        return ServerError(message, status=status)
    if status in (401, 403):
        return AuthenticationFailed(message, status=status)
    if status >= 400 and param in UNSUPPORTED_PARAMS:
        return Unsupported(message, feature=param, status=status)
    if status == 400 and param is None and "response_format" in detail:  # named in the text only
        return Unsupported(message, feature="response_format", status=status)
    if status >= 400:
        return BadRequest(message, status=status)
    return MalformedResponse(f"unexpected HTTP status {status}: {detail}", status=status)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date); None if unreadable."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=_dt.UTC)
        seconds = (when - _dt.datetime.now(_dt.UTC)).total_seconds()
    if seconds != seconds or seconds < 0:  # NaN or in the past
        return 0.0 if seconds == seconds else None
    return seconds
