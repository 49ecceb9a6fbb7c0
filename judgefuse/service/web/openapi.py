"""What ``/openapi.json`` says about errors and authentication, beyond FastAPI's defaults.

FastAPI declares a 422 of its own shape (``{"detail": [...]}``, ``HTTPValidationError``) on every
operation with an input, and no other error. The server never sends that shape: every error is
:class:`~judgefuse.service.schemas.ErrorBody` (:mod:`judgefuse.service.errors`). The document is
post-processed here (:func:`install_openapi`):

* each operation declares the error statuses of :data:`ERRORS` (the one table, read from the
  handlers, the middleware, authentication and admission; see its comments), with the
  ``ErrorBody`` schema; FastAPI's 422 and its ``HTTPValidationError`` / ``ValidationError``
  components are removed;
* 429 declares ``Retry-After`` (always sent), a 503 ``Retry-After`` where storage may be down
  (sent then, not on a lost quorum), 401 ``WWW-Authenticate``, a batch's 200 ``Retry-After``
  (when items were refused by admission control);
* ``components.securitySchemes``: ``bearerAuth`` (``Authorization: Bearer <key>``) and
  ``apiKeyHeader`` (``X-API-Key``), either one required by every operation with a 401;
  :data:`DESCRIPTION` (the ``info`` description) says what open mode means.

An operation missing from :data:`ERRORS` (a new route) is logged and fails
``tests/service/web/test_openapi_errors.py``; the schemathesis suite (``tests/service/system/test_fuzz.py``)
checks every answer's status, content type, body and headers against the document, and that test
provokes the statuses fuzzing cannot reach: a drift between code and document fails the suite.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from judgefuse.service.schemas import ErrorBody

__all__ = ["DESCRIPTION", "ERRORS", "SECURITY_SCHEMES", "describe_errors", "install_openapi"]

log = logging.getLogger("judgefuse.service")

DESCRIPTION = """\
Calibrated LLM-as-a-judge gateway.

**Authentication.** Every `/v1/` operation needs a tenant API key, sent as
`Authorization: Bearer <key>` or `X-API-Key: <key>` (either one); a missing, malformed or
unknown key is a 401. A key is never accepted in the query string: such a request is a 400.
`/healthz` and `/readyz` are public.

**Annotator credentials** (made by an operator with `POST /v1/annotators` or `judgefuse
annotators create`) may only lease, label, skip and read their own history (`GET
/v1/review/next`, `POST /v1/review/skip`, `POST /v1/feedback`, `GET /v1/annotators/me`), within
their panels: anything else is a 403. A tenant API key is the pipeline's and the operator's key.

**Open mode.** When no API keys are configured (`JUDGEFUSE_WEB__API_KEYS` empty) or `auth_disabled`
is set, the gateway runs in open mode: no key is needed, no request is answered 401, and every
request belongs to tenant `default`. It is meant for local use only (the server logs a warning
at start); the security schemes below then apply to nobody.

**Errors.** Every error answers with an `ErrorBody`:
`{"error": "...", "fields": [{"field": "body.answer_a", "problem": "..."}]}`. `fields` names the
request fields at fault (always on 401, 413 and 422); a 429 adds the full `limit` and
`retry_after_s` (and the `Retry-After` header), a 503 for a lost quorum the `failed_judges`.
Batch operations answer 200 with each item's own status and error in `results`.
"""

BEARER = "bearerAuth"
API_KEY = "apiKeyHeader"
SECURITY_SCHEMES: dict[str, dict[str, Any]] = {
    BEARER: {"type": "http", "scheme": "bearer",
             "description": "A tenant API key: `Authorization: Bearer <key>`"},
    API_KEY: {"type": "apiKey", "in": "header", "name": "X-API-Key",
              "description": "A tenant API key: `X-API-Key: <key>`"},
}

_KEYED = (400, 401, 403)
"""Every ``/v1/`` operation: 400 (credentials in the query string, QueryKeyMiddleware; with a
body also one that is not UTF-8), 401 (no valid tenant key, ``deps.get_tenant``) and 403 (an
annotator credential where a tenant key is needed, or outside its panels: web/auth.py)."""
_BODY = (408, 413, 422)
"""Every operation with a request body (all keyed): 408 (body not received within
``body_timeout_s``), 413 (over ``max_body_bytes``), 422 (a field fails the schema or a limit;
a body that is not JSON)."""

ERRORS: dict[str, tuple[int, ...]] = {
    # public: only the query-string credential check runs (readyz's own 503 is a ReadyOut,
    # declared on its route)
    "GET /healthz": (400,),
    "GET /readyz": (400,),
    # 409: the id is used for another item (also while in flight, single_flight); 429: admission
    # (before any judge call); 503: a lost quorum, or storage unavailable
    "POST /v1/judge": (*_KEYED, *_BODY, 409, 429, 503),
    # per-item 409 / 422 / 429 / 503 are inside the 200's results; 413: also over max_batch_items
    "POST /v1/judge/batch": (*_KEYED, *_BODY),
    # too few valid posted votes is a 422 here, not a 503: 503 only when storage is unavailable;
    # 422 also: a vote for a model (not external) judge, a p_a contradicting its choice, a string
    # or boolean number, over the signal limits, NUL in text; 409 also: a replay with other votes
    "POST /v1/fuse": (*_KEYED, *_BODY, 409, 429, 503),
    "POST /v1/fuse/batch": (*_KEYED, *_BODY),
    # any string is a valid id (an impossible one is simply not found): no 422
    "GET /v1/verdicts/{verdict_id}": (*_KEYED, 404, 503),
    # 404: no verdict with that id for this tenant
    # 429: backpressure (web/backpressure.py) on these and the review queue's next / skip
    "POST /v1/feedback": (*_KEYED, *_BODY, 404, 429, 503),
    # 422: a query parameter out of range, an unknown panel, eps / n_bins not tracked
    "GET /v1/calibration": (*_KEYED, 422, 503),
    # 422 also: x and y the same system, level outside (0.5, 1)
    "GET /v1/panels/{panel}/winrate": (*_KEYED, 422, 503),
    # 422 also: width outside (0, 1], window_days outside (0, 3650]; 429: the report gate
    # (estimates.max_inflight_reports) had no place within report_wait_s
    "GET /v1/panels/{panel}/plan": (*_KEYED, 422, 429, 503),
    "GET /v1/thresholds": (*_KEYED, 422, 503),
    "POST /v1/thresholds/tune": (*_KEYED, *_BODY, 503),
    "POST /v1/fusion/refit": (*_KEYED, *_BODY, 503),
    "GET /v1/fusion/models": (*_KEYED, 422, 503),
    "GET /v1/fusion/refits": (*_KEYED, 422, 503),
    # 422: also an unusable annotator name (query or X-Annotator header)
    # 409: the annotator or the calling key holds its cap of leased items
    "GET /v1/review/next": (*_KEYED, 409, 422, 429, 503),
    # 404: this annotator holds no live lease on the verdict
    "POST /v1/review/skip": (*_KEYED, *_BODY, 404, 429, 503),
    "GET /v1/review/stats": (*_KEYED, 422, 503),
    "GET /v1/monitor": (*_KEYED, 422, 503),
    "POST /v1/monitor/clear": (*_KEYED, *_BODY, 503),
    # annotator accounts (review/annotator_routes.py): 409 a name taken, a revoked account
    # rotated; 404 no such account; 503 also when the accounts' state kept changing
    "POST /v1/annotators": (*_KEYED, *_BODY, 409, 503),
    "GET /v1/annotators": (*_KEYED, 503),
    "GET /v1/annotators/me": (*_KEYED, 503),
    "POST /v1/annotators/{annotator}/revoke": (*_KEYED, 404, 422, 503),
    "POST /v1/annotators/{annotator}/rotate": (*_KEYED, 404, 409, 422, 503),
}
"""``"METHOD /path"`` -> the error statuses it answers with an :class:`ErrorBody`. Not listed
anywhere: 500 (a bug or a storage fault: never by design), 404 / 405 for paths and methods that
are no operation."""
_BATCHES = ("POST /v1/judge/batch", "POST /v1/fuse/batch")
"""Their 200 may carry ``Retry-After`` (items refused by admission control)."""

_DESCRIPTIONS = {
    400: "Credentials in the query string (refused before authentication; `fields` names the "
         "parameter)",
    401: "No valid API key: send `Authorization: Bearer <key>` or `X-API-Key: <key>` "
         "(never in open mode)",
    403: "The credential is valid but may not do this: an annotator credential may only lease, "
         "label, skip and read its own history, within its panels",
    404: "Not found for this tenant",
    408: "The request body was not received within `body_timeout_s`; the connection is closed",
    409: "The verdict `id` is already used for a different item",
    413: "The body is over `max_body_bytes`",
    422: "A request field is invalid: `fields` names each one",
    429: "A limit (`limit`) is full: an in-flight limit, or the server past its capacity "
         "(`max_inflight_work`, `shed_loop_lag_s`, `shed_sojourn_s`, `shed_wait_s`); nothing was done. Retry after `Retry-After` seconds",
    503: "Storage is unavailable; retry after `Retry-After` seconds",
}
_ANY_BODY = "with a body"
_MORE: dict[tuple[int, str], str] = {
    (400, _ANY_BODY): "; or a body that is not valid UTF-8",
    (413, "POST /v1/judge/batch"): "; or a batch of more than `max_batch_items` items",
    (413, "POST /v1/fuse/batch"): "; or a batch of more than `max_batch_items` items",
    (409, "POST /v1/fuse"): "; or with other votes than those posted under it (a replay must post "
                            "the same votes)",
    (503, "POST /v1/judge"): "; or the panel lost its quorum: `failed_judges` says why each judge "
                             "failed (no `Retry-After`)",
}
"""What a status also means on one operation, or on every operation with a body."""


_OWN: dict[tuple[int, str], str] = {
    (409, "GET /v1/review/next"): "The annotator (`review_max_held_per_annotator`) or the calling "
                                  "key (`review_max_held_per_caller`) already holds its cap of "
                                  "leased items: label or skip them first",
    (409, "POST /v1/annotators"): "An active annotator of this tenant already has the name",
    (409, "POST /v1/annotators/{annotator}/rotate"): "The account is revoked: create a new one",
}
"""What a status means on one operation instead of its general description."""


def _description(key: str, status: int, has_body: bool) -> str:
    return (_OWN.get((status, key), _DESCRIPTIONS[status]) + _MORE.get((status, key), "")
            + (_MORE.get((status, _ANY_BODY), "") if has_body else ""))


_RETRY_AFTER = {"description": "Seconds to wait before retrying", "schema": {"type": "integer", "minimum": 1}}
_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "required": True, "schema": {"type": "string"}}},
    429: {"Retry-After": {**_RETRY_AFTER, "required": True}},
    503: {"Retry-After": {**_RETRY_AFTER, "description": "Seconds to wait before retrying (when "
                                                         "storage is unavailable)"}},
}
_BATCH_RETRY_AFTER = {"Retry-After": {**_RETRY_AFTER, "description": (
    "Sent when items were refused by admission control (status 429 in `results`): the longest "
    "of their `retry_after_s`")}}

_FASTAPI_422 = "#/components/schemas/HTTPValidationError"


def _error_schemas() -> dict[str, dict[str, Any]]:
    """``ErrorBody`` and the models it refers to, as components."""
    schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
    defs = schema.pop("$defs", {})
    return {**defs, "ErrorBody": schema}


def describe_errors(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` (FastAPI's) with the errors of :data:`ERRORS`, the security schemes and
    each keyed operation's security requirement. Changes ``document`` in place; returns it."""
    components = document.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    operations = {f"{method.upper()} {path}": operation
                  for path, item in document.get("paths", {}).items()
                  for method, operation in item.items()}
    unlisted = sorted(set(operations) - set(ERRORS))
    if unlisted:  # a route added without its row (tests/service/web/test_openapi_errors.py fails)
        log.warning("openapi.ERRORS has no row for %s: only their 422 is described", ", ".join(unlisted))
    for name, schema in _error_schemas().items():
        if schemas.setdefault(name, schema) != schema:
            raise RuntimeError(f"component {name!r} is defined twice, differently")
    for key, operation in operations.items():
        responses = operation.setdefault("responses", {})
        declared = responses.get("422", {}).get("content", {}).get("application/json", {})
        fastapi_422 = declared.get("schema", {}).get("$ref") == _FASTAPI_422
        if fastapi_422:
            del responses["422"]
        statuses = ERRORS.get(key, (422,) if fastapi_422 else ())
        for status in statuses:
            if str(status) in responses:
                raise RuntimeError(f"{key} declares {status} itself; list it in one place")
            response: dict[str, Any] = {
                "description": _description(key, status, "requestBody" in operation),
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            }
            if status in _HEADERS:
                response["headers"] = copy.deepcopy(_HEADERS[status])
            responses[str(status)] = response
        if key in _BATCHES and "200" in responses:
            responses["200"]["headers"] = copy.deepcopy(_BATCH_RETRY_AFTER)
        if 401 in statuses:
            operation["security"] = [{BEARER: []}, {API_KEY: []}]
        operation["responses"] = dict(sorted(responses.items()))
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    components["schemas"] = dict(sorted(schemas.items()))
    components["securitySchemes"] = copy.deepcopy(SECURITY_SCHEMES)
    return document


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` (and ``GET /openapi.json``) return the document with
    :func:`describe_errors` applied. Call after every router is included."""
    build: Callable[[], dict[str, Any]] = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = describe_errors(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
