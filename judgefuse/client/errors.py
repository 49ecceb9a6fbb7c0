"""The client's exceptions: one per kind of answer the gateway gives, carrying its error body.

Every error answer of the gateway has one shape (:class:`~judgefuse.service.schemas.ErrorBody`,
docs/design.md, 'Serving'): ``{"error": "what was wrong", "fields": [{"field": ..., "problem":
...}], ...}``. The client maps the status to the most specific class below and keeps the body,
so a pipeline can branch on the type and show the server's own words::

    JudgefuseError                  anything this client raises
    +-- APIError                    the gateway answered with an error status
    |   +-- InvalidRequest (400, 422)   a field fails the schema or a limit: see ``fields``
    |   +-- Unauthorized (401, 403)
    |   +-- NotFound (404)
    |   +-- Conflict (409)              an id already used for a different item
    |   +-- TooLarge (413)              body (or batch) over the server's limit
    |   +-- Overloaded (429)            still refused when the retry deadline ran out
    |   +-- Unavailable (503)           quorum lost / storage down, after the retries
    |   +-- ServerError (other 5xx)
    +-- ConnectionFailed            no answer at all (connect error, timeout) after the retries

Retryable answers (429, 503, no connection) are only raised once the client's retry deadline
has run out (:mod:`judgefuse.client.retry`); every other error is raised on the first answer.
"""

from __future__ import annotations

from typing import Any

from judgefuse.service.schemas import ErrorBody, ErrorField

__all__ = [
    "APIError",
    "Conflict",
    "ConnectionFailed",
    "InvalidRequest",
    "JudgefuseError",
    "NotFound",
    "Overloaded",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "error_for",
]


class JudgefuseError(Exception):
    """Anything :class:`~judgefuse.client.Client` raises."""


class APIError(JudgefuseError):
    """The gateway answered ``status`` with an error body.

    ``error`` is the server's message, ``fields`` the request fields at fault (empty when the
    error is not about a field), ``body`` the whole parsed :class:`ErrorBody` (``limit``,
    ``retry_after_s``, ``failed_judges``... when they apply), ``attempts`` how many times the
    request was sent."""

    def __init__(self, status: int, body: ErrorBody, *, method: str = "", path: str = "",
                 attempts: int = 1) -> None:
        self.status = status
        self.body = body
        self.error = body.error
        self.fields: list[ErrorField] = list(body.fields or [])
        self.method = method
        self.path = path
        self.attempts = attempts
        where = f"{method} {path}: " if path else ""
        detail = "; ".join(f"{f.field}: {f.problem}" for f in self.fields)
        shown = f" ({detail})" if detail and detail not in self.error else ""
        super().__init__(f"{where}{status} {self.error}{shown}")

    @property
    def retry_after_s(self) -> int | None:
        return self.body.retry_after_s


class InvalidRequest(APIError):
    """400 / 422: the request is wrong; sending it again will not help."""


class Unauthorized(APIError):
    """401 / 403: missing, unknown or insufficient credential."""


class NotFound(APIError):
    """404: no such verdict (or resource) for this tenant."""


class Conflict(APIError):
    """409: the id is already used for a different item."""


class TooLarge(APIError):
    """413: the body or the batch is over the server's limit."""


class Overloaded(APIError):
    """429: an in-flight limit stayed full until the retry deadline."""


class Unavailable(APIError):
    """503: quorum lost or storage unavailable, until the retry deadline."""


class ServerError(APIError):
    """Any other 5xx."""


class ConnectionFailed(JudgefuseError):
    """No answer from the gateway (connection refused or reset, timeout) within the deadline;
    the transport error is the ``__cause__``."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


_BY_STATUS: dict[int, type[APIError]] = {
    400: InvalidRequest, 422: InvalidRequest, 401: Unauthorized, 403: Unauthorized,
    404: NotFound, 409: Conflict, 413: TooLarge, 429: Overloaded, 503: Unavailable,
}


def parse_error_body(status: int, payload: Any, text: str = "") -> ErrorBody:
    """The server's error body; an answer that is not one (a proxy's HTML page, a body with
    keys this version does not know) keeps what it can: ``error`` and ``fields``."""
    if isinstance(payload, dict):
        try:
            return ErrorBody.model_validate(payload)
        except ValueError:
            fields = [ErrorField(field=str(f.get("field", "")), problem=str(f.get("problem", "")))
                      for f in payload.get("fields") or [] if isinstance(f, dict)]
            message = payload.get("error") or payload.get("detail") or f"HTTP {status}"
            return ErrorBody(error=str(message), fields=fields or None)
    return ErrorBody(error=(text.strip()[:500] or f"HTTP {status}"))


def error_for(status: int, payload: Any, text: str = "", *, method: str = "", path: str = "",
              attempts: int = 1) -> APIError:
    """The exception for an error answer (``payload``: its parsed JSON, or None)."""
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else InvalidRequest)
    return cls(status, parse_error_body(status, payload, text), method=method, path=path,
               attempts=attempts)
