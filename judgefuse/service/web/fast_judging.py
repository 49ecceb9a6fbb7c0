"""``POST /v1/judge`` and ``POST /v1/fuse`` answered below FastAPI's request handling.

Why: a verdict is the gateway's most repeated request, and FastAPI's and Starlette's layers
between the middleware and the route (routing over every route, the request handler, the
dependency solver, the app's own body limit and telemetry hooks, the exception wrappers around
``send``) took 14% of the event loop's time under ``/v1/judge``'s closed loop
(``benchmarks/profile_gateway.py --gil``), more than the route's own Python outside the judge
calls. This middleware takes the two routes' happy path, inside the request timing and
the backpressure gates and in front of the other middleware of the app's own:

* a request without a query string, with a ``Content-Length`` within ``max_body_bytes`` and a
  JSON content type (or none);
* its body read whole within ``body_timeout_s`` (else the route's 408), decoded as JSON and
  validated as the route's model, as FastAPI does (``json.loads``, then the model in Python
  mode);
* the caller's key names a tenant (:meth:`~judgefuse.service.web.auth.Authenticator.tenant_for`,
  as ``TenantDep``);
* the pair is judged by the same call the route makes (``JudgePipeline.judge``) and answered
  with the same response (:func:`~judgefuse.service.web.deps.json_response`).

**Every refusal is FastAPI's own, by construction.** A body that is not JSON or does not
validate, a missing or unknown key, an annotator's credential, a content type FastAPI would not
read as JSON, a query string (which may
carry a key: refused inside), a body without a length or over the limit: none of these is
answered here. The request goes on through the app's middleware to FastAPI, with the body this
middleware already read (if it read it) and before anything was judged, so its status, body and
headers are the ones the route gives. An error the service raises while judging is answered by the app's own
exception handler for its class (as FastAPI's exception middleware does); one without a handler
propagates to the server error handler outside, as it does through FastAPI. The routes stay
registered with FastAPI: the OpenAPI document, ``/docs`` and the batch routes are theirs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from pydantic import BaseModel
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judgefuse.judges.deadline import Deadline
from judgefuse.service.kernel.accounts import CREDENTIAL_PREFIX
from judgefuse.service.schemas import FuseRequest, JudgeRequest
from judgefuse.service.web.deps import json_response
from judgefuse.service.web.middleware import FORM_MEDIA_TYPE, BodyTimeout, media_type

__all__ = ["FastJudging"]

_BODIES: dict[str, type[BaseModel]] = {"/v1/judge": JudgeRequest, "/v1/fuse": FuseRequest}
"""The routes taken here and their bodies (the routes' own parameter types)."""


def _json_content_type(value: bytes) -> bool:
    """Whether FastAPI reads a body of this ``Content-Type`` as JSON: ``application/json`` or
    ``application/*+json``, parameters ignored; or a form, which
    :class:`~judgefuse.service.web.middleware.FormAsJsonMiddleware` hands on as JSON. (No header
    at all is read as JSON too: the app's routers are not strict about it.)"""
    media = media_type(value)
    return (media == b"application/json" or media == FORM_MEDIA_TYPE
            or (media.startswith(b"application/") and media.endswith(b"+json")))


class FastJudging:
    """The middleware of the module docstring."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout_s: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout_s = body_timeout_s
        self._routes: dict[str, APIRoute] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        model = _BODIES.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if model is None or scope["query_string"]:
            await self.app(scope, receive, send)
            return
        authorization = x_api_key = length = None
        for name, value in scope["headers"]:  # a repeated header: its first value, as Starlette's
            if name == b"authorization":
                if authorization is None:
                    authorization = value.decode("latin-1")
            elif name == b"x-api-key":
                if x_api_key is None:
                    x_api_key = value.decode("latin-1")
            elif name == b"content-length":
                if length is None:
                    length = value
            elif name == b"content-type" and not _json_content_type(value):
                await self.app(scope, receive, send)
                return
        if length is None or not length.isdigit() or int(length) > self.max_body_bytes:
            await self.app(scope, receive, send)  # chunked, or over the limit: refused inside
            return
        app = scope["app"]
        deadline = Deadline()
        deadline.reschedule(asyncio.get_running_loop().time() + self.body_timeout_s)
        try:
            messages, body = await _read_body(receive)
        except BaseException as exc:
            if not deadline.close(exc):
                raise
            await _answer_error(app, scope, receive, send, BodyTimeout(self.body_timeout_s))
            return
        deadline.close(None)
        request = _validated(model, body) if messages[-1]["type"] == "http.request" else None
        tenant = None
        if request is not None and CREDENTIAL_PREFIX not in (authorization or x_api_key or ""):
            try:
                tenant = app.state.authenticator.tenant_for(authorization, x_api_key)
            except Exception:  # noqa: BLE001 - FastAPI's dependency answers it, below
                tenant = None
        if request is None or tenant is None:
            await self.app(scope, _replaying(messages, receive), send)
            return
        scope["route"] = self._route(app, scope["path"])  # the request timing's label
        try:
            response = json_response(await app.state.gateway.judging.judge(tenant, request))
        except Exception as exc:
            await _answer_error(app, scope, receive, send, exc)
            return
        await response(scope, receive, send)

    def _route(self, app: Any, path: str) -> APIRoute | None:
        """The FastAPI route of ``path`` (what FastAPI's routing puts in ``scope["route"]``)."""
        if self._routes is None:
            self._routes = {route.path: route for route in _api_routes(app.routes)
                            if route.path in _BODIES and "POST" in route.methods}
        return self._routes.get(path)


def _api_routes(routes: Any) -> Any:
    """Every :class:`APIRoute` of ``routes``, into the routers included in them."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)  # FastAPI's included router
        if included is not None:
            yield from _api_routes(included.routes)


async def _read_body(receive: Receive) -> tuple[list[Message], bytes]:
    """(the messages read, the body they carry): up to the body's last part, or up to the
    client's disconnect (the last message then says so). The server holds the body to its
    ``Content-Length``, which is within the limit."""
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            break
    if len(messages) == 1:
        return messages, messages[0].get("body", b"")
    return messages, b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")


def _validated(model: type[BaseModel], body: bytes) -> BaseModel | None:
    """The route's body model of ``body`` as FastAPI builds it, or None when FastAPI would
    refuse it (it is then FastAPI's to answer)."""
    if not body:
        return None
    try:
        return model.model_validate(json.loads(body))
    except (ValueError, RecursionError):  # not JSON, not UTF-8, too deep, not valid (a ValueError)
        return None


def _replaying(messages: list[Message], receive: Receive) -> Receive:
    """``receive`` giving back the messages read here first, in order (then the client's own:
    a disconnect)."""
    pending = messages[::-1]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


async def _answer_error(app: Any, scope: Scope, receive: Receive, send: Send, exc: Exception) -> None:
    """Answer ``exc`` with the app's own handler for it, as FastAPI's exception middleware
    would; without one it propagates (to the server error handler outside)."""
    handler = _handler_for(app.exception_handlers, exc)
    if handler is None:
        raise exc
    response = handler(Request(scope, receive), exc)
    if inspect.isawaitable(response):
        response = await response
    await response(scope, receive, send)


def _handler_for(handlers: dict[Any, Any], exc: Exception) -> Any:
    """The app's exception handler for ``exc`` as FastAPI's exception middleware finds it (the
    nearest class in its MRO; ``Exception`` itself belongs to the server error handler outside,
    which the exception then reaches by propagating)."""
    for cls in type(exc).__mro__:
        if cls is Exception:
            return None
        handler = handlers.get(cls)
        if handler is not None:
            return handler
    return None
