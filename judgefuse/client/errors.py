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
    +-- BadResponse                 an answer that is not the API's: a 3xx, non-JSON, a wrong shape
    |   +-- ResponseTooLarge            a body over the client's ``max_response_bytes``
    +-- ConnectionFailed            no answer at all (connect error, timeout) after the retries
    |   +-- DeadlineExceeded            the answer did not arrive in full within ``deadline_s``
    +-- GatewayDown                 ``judge_pairs`` stopped: the circuit breaker opened

A request the client can tell is wrong (a label ``"C"``, a confidence of 1.5) is refused before
it is sent, as :class:`InvalidRequest` with ``status`` 0 and the field named as the gateway
would name it (``body.label``): one exception type whichever side finds the fault.

Retryable answers (429, 503, no connection) are only raised once the client's retry deadline
has run out (:mod:`judgefuse.client.retry`); every other error is raised on the first answer.
"""

from __future__ import annotations

from typing import Any

from judgefuse import errors as package_errors
from judgefuse.service.schemas import ErrorBody, ErrorField

__all__ = [
    "APIError",
    "BadResponse",
    "Conflict",
    "ConnectionFailed",
    "DeadlineExceeded",
    "GatewayDown",
    "InvalidRequest",
    "JudgefuseError",
    "NotFound",
    "Overloaded",
    "ResponseTooLarge",
    "ServerError",
    "TooLarge",
    "Unauthorized",
    "Unavailable",
    "error_for",
]


class JudgefuseError(package_errors.JudgefuseError):
    """Anything :class:`~judgefuse.client.Client` raises (a branch of the package's root,
    :class:`judgefuse.errors.JudgefuseError`, which imports nothing: the client still needs
    nothing of the server)."""


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
    """400 / 422: the request is wrong; sending it again will not help. ``status`` 0: the
    client refused it before sending (see :meth:`before_sending`)."""

    @classmethod
    def before_sending(cls, problems: list[tuple[str, str]], *, method: str = "",
                       path: str = "") -> InvalidRequest:
        """The error for a request the client will not send: ``problems`` are ``(field,
        problem)`` pairs, the field named as the gateway names it (``body.label``)."""
        fields = [ErrorField(field=f, problem=p) for f, p in problems]
        body = ErrorBody(error="refused before sending: " + "; ".join(f"{f}: {p}" for f, p in problems),
                         fields=fields)
        return cls(0, body, method=method, path=path, attempts=0)

    @classmethod
    def from_validation(cls, exc: Any, *, prefix: str = "body", method: str = "",
                        path: str = "") -> InvalidRequest:
        """A pydantic ``ValidationError`` as :class:`InvalidRequest`, so a caller catches one
        library's type whichever side found the fault (pydantic stays the ``__cause__``)."""
        problems = [(".".join([prefix, *(str(part) for part in error.get("loc", ()))]),
                     str(error.get("msg", "invalid")))
                    for error in exc.errors(include_url=False)]
        return cls.before_sending(problems or [(prefix, str(exc))], method=method, path=path)


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


class BadResponse(JudgefuseError):
    """The gateway (or whatever answered at its address: a proxy, a login page) gave an answer
    the API never gives: a redirect, a body that is not JSON, JSON of the wrong shape, a body
    cut short. ``status`` is the answer's HTTP status, ``problem`` what was wrong with it; the
    parser's own error, when there is one, is the ``__cause__``. Not retried: the same address
    will answer the same way."""

    def __init__(self, status: int, problem: str, *, method: str = "", path: str = "",
                 attempts: int = 1) -> None:
        self.status = status
        self.problem = problem
        self.method = method
        self.path = path
        self.attempts = attempts
        where = f"{method} {path}: " if path else ""
        super().__init__(f"{where}bad answer (HTTP {status}): {problem}")


class ResponseTooLarge(BadResponse):
    """The answer's body passed the client's ``max_response_bytes``; it was not read further,
    so a runaway answer costs at most that much memory."""

    def __init__(self, status: int, limit: int, *, method: str = "", path: str = "",
                 attempts: int = 1) -> None:
        self.limit = limit
        super().__init__(status, f"body over max_response_bytes={limit:,}; not read further",
                         method=method, path=path, attempts=attempts)


class ConnectionFailed(JudgefuseError):
    """No answer from the gateway (connection refused or reset, timeout) within the deadline;
    the transport error is the ``__cause__``."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class DeadlineExceeded(ConnectionFailed):
    """The whole answer (headers and body) did not arrive within the retry policy's
    ``deadline_s``: a gateway that trickles its answer is cut at the deadline, not at the
    read timeout of each chunk."""


class GatewayDown(JudgefuseError):
    """``judge_pairs`` stopped because the gateway stopped answering: ``failures`` connection
    failures in a row, or none answered for ``outage_s`` (the run's circuit breaker). Raised
    once for the run, instead of every remaining pair waiting out its own retry deadline.
    ``finished`` pairs were judged (and, with ``resume=``, written); a rerun of the same call
    with the same ``resume`` file judges only the rest."""

    def __init__(self, message: str, *, finished: int, failures: int, outage_s: float,
                 resume: str | None) -> None:
        super().__init__(message)
        self.finished = finished
        self.failures = failures
        self.outage_s = outage_s
        self.resume = resume


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
