"""The service's errors and their mapping to JSON responses (the one place that decides statuses).

Every error body has the same shape::

    {"error": "what was wrong", "fields": [{"field": "body.answer_a", "problem": "..."}], ...}

``fields`` is present when a request field is at fault. Error bodies never echo the offending
input (it may be long, or a secret pasted into the wrong field).

Hierarchy (raised by the gateway and routes, mapped here)::

    ServiceError                 -> its .status
    +-- FieldProblem (422)       a request field fails a limit checked against settings
    +-- InvalidFields (422)      several fields at once (a batch item failing the schema)
    +-- TooLarge (413)           body or batch too large
    +-- NotFound (404)           unknown verdict / resource for this tenant
    +-- Conflict (409)           an id already used for a different verdict
    +-- QuorumLost (503)         fewer valid votes than the panel's quorum (reasons per judge)
    +-- Overloaded (429)         an in-flight limit is full; ``Retry-After`` says when to retry
    +-- Unauthorized (401)
    +-- Forbidden (403)          a valid credential whose role may not do this
    StorageUnavailable (503), VerdictNotFound (404), other StorageError (500)
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from judgefuse.errors import JudgefuseError
from judgefuse.field_path import field_path
from judgefuse.judges.types import JudgeVote
from judgefuse.service.storage import StorageError, StorageUnavailable, VerdictNotFound

__all__ = [
    "Conflict",
    "FieldProblem",
    "Forbidden",
    "InvalidFields",
    "NotFound",
    "Overloaded",
    "QuorumLost",
    "ServiceError",
    "TooLarge",
    "Unauthorized",
    "error_body",
    "install_handlers",
]

log = logging.getLogger("judgefuse.service")


def error_body(error: str, fields: Sequence[tuple[str, str]] = (), **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"error": error}
    if fields:
        body["fields"] = [{"field": f, "problem": p} for f, p in fields]
    body.update(extra)
    return body


class ServiceError(JudgefuseError):
    status = 500

    def __init__(
        self, message: str, *, fields: Sequence[tuple[str, str]] = (), **extra: Any
    ) -> None:
        super().__init__(message)
        self.message = message
        self.fields = list(fields)
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.fields, **self.extra)

    def headers(self) -> dict[str, str] | None:
        """Response headers this error needs (None: none)."""
        return None


class FieldProblem(ServiceError):
    status = 422

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"invalid request: {field}: {problem}", fields=[(field, problem)])


class InvalidFields(ServiceError):
    """422 naming several fields at once (a batch item that failed schema validation)."""

    status = 422

    @classmethod
    def of_pydantic(cls, prefix: str, errors: Sequence[dict[str, Any]]) -> InvalidFields:
        fields = [(field_path([prefix, *e.get("loc", ())], empty="body"), str(e.get("msg", "invalid")))
                  for e in errors] or [(prefix, "invalid")]
        summary = "; ".join(f"{f}: {p}" for f, p in fields[:5])
        return cls(f"invalid request: {summary}", fields=fields)


class TooLarge(ServiceError):
    status = 413


class NotFound(ServiceError):
    status = 404


class Conflict(ServiceError):
    status = 409


class Forbidden(ServiceError):
    """403: the credential is valid but its role may not do this (an annotator credential
    outside lease, label, skip and its own history; another panel's queue)."""

    status = 403


class Unauthorized(ServiceError):
    status = 401

    def headers(self) -> dict[str, str] | None:
        return {"WWW-Authenticate": "Bearer"}


class Overloaded(ServiceError):
    """429 before any judge call: ``limit`` (the setting's name) is full; retry after
    ``retry_after_s`` (also sent as ``Retry-After``)."""

    status = 429

    def __init__(self, limit: str, value: int, retry_after_s: int, *, tenant: str | None = None) -> None:
        who = f"tenant {tenant!r} has" if limit == "max_inflight_per_tenant" and tenant else "the gateway has"
        super().__init__(
            f"overloaded: {who} {value} requests in flight, the limit {limit}={value}; "
            f"retry after {retry_after_s}s",
            limit=limit,
            max_inflight=value,
            retry_after_s=retry_after_s,
        )
        self.limit = limit
        self.retry_after_s = retry_after_s

    @classmethod
    def shed(cls, limit: str, value: int | None, retry_after_s: int, reason: str) -> Overloaded:
        """Refused by backpressure before the request was read
        (:mod:`judgefuse.service.web.backpressure`): ``reason`` says which gate and why."""
        error = cls(limit, 0, retry_after_s)
        extra: dict[str, Any] = {"limit": limit, "retry_after_s": retry_after_s}
        if value is not None:
            extra["max_inflight"] = value
        ServiceError.__init__(error, f"overloaded: {reason}; retry after {retry_after_s}s", **extra)
        return error

    def headers(self) -> dict[str, str] | None:
        return {"Retry-After": str(self.retry_after_s)}


class QuorumLost(ServiceError):
    """Too few valid votes: 503 with each failed judge's reason."""

    status = 503

    def __init__(self, panel: str, votes: Sequence[JudgeVote], quorum: int) -> None:
        valid = sum(1 for v in votes if v.valid)
        super().__init__(
            f"quorum lost on panel {panel!r}: {valid} valid vote(s), the quorum is {quorum}",
            panel=panel,
            quorum=quorum,
            valid_votes=valid,
            failed_judges=[
                {"judge": v.judge, "reason": v.error or "no usable vote"}
                for v in votes if v.failed
            ],
        )


def validation_fields(exc: RequestValidationError) -> list[tuple[str, str]]:
    fields = []
    for err in exc.errors():
        problem = str(err.get("msg", "invalid"))
        if err.get("type") == "json_invalid":
            problem = "the body is not valid JSON"
        fields.append((field_path(err.get("loc", ()), empty="body"), problem))
    return fields


def install_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = validation_fields(exc)
        summary = "; ".join(f"{f}: {p}" for f, p in fields[:5])
        return JSONResponse(error_body(f"invalid request: {summary}", fields), status_code=422)

    @app.exception_handler(ServiceError)
    async def _service(request: Request, exc: ServiceError) -> JSONResponse:
        return JSONResponse(exc.body(), status_code=exc.status, headers=exc.headers())

    @app.exception_handler(VerdictNotFound)
    async def _not_found(request: Request, exc: VerdictNotFound) -> JSONResponse:
        return JSONResponse(
            error_body(f"verdict {exc.verdict_id!r} not found", [("verdict_id", "unknown id")]),
            status_code=404,
        )

    @app.exception_handler(StorageUnavailable)
    async def _unavailable(request: Request, exc: StorageUnavailable) -> JSONResponse:
        log.warning("storage unavailable: %s", exc)
        return JSONResponse(
            error_body("storage unavailable, retry later"), status_code=503,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(StorageError)
    async def _storage(request: Request, exc: StorageError) -> JSONResponse:
        log.error("storage error: %s", exc)
        return JSONResponse(error_body("storage error"), status_code=500)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        message = exc.detail if isinstance(exc.detail, str) else "error"
        if exc.status_code == 404 and message == "Not Found":
            message = f"no such endpoint: {request.method} {request.url.path}"
        if exc.status_code == 405:
            message = f"method {request.method} not allowed on {request.url.path}"
        fields = [("body", message)] if exc.status_code == 413 else []
        if exc.status_code == 408:  # the body-read deadline (middleware): the connection ends
            return JSONResponse(error_body(message, [("body", "not received in time")]),
                                status_code=408, headers={"Connection": "close"})
        if exc.status_code == 400 and message == "There was an error parsing the body":
            # FastAPI's answer when json.loads fails other than JSONDecodeError (RecursionError on
            # deeply nested arrays, UnicodeDecodeError, ...; the cause is chained): say what was
            # wrong, in the usual shape
            if isinstance(exc.__cause__, UnicodeDecodeError):
                return JSONResponse(
                    error_body("invalid request: body: the body is not valid UTF-8 "
                               f"(bad byte at offset {exc.__cause__.start})",
                               [("body", "not valid UTF-8")]),
                    status_code=400,
                )
            return JSONResponse(
                error_body("invalid request: body: the body could not be parsed as JSON "
                           "(nested too deeply?)",
                           [("body", "could not be parsed as JSON (nested too deeply?)")]),
                status_code=422,
            )
        return JSONResponse(error_body(message, fields), status_code=exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _unhandled(request: Request, exc: Exception) -> JSONResponse:
        log.error("unhandled error on %s %s: %s", request.method, request.url.path,
                  type(exc).__name__, exc_info=exc)
        # the server drops the connection after an unhandled error: say so to the client
        return JSONResponse(error_body("internal error"), status_code=500,
                            headers={"Connection": "close"})
