"""Pure ASGI middleware (cheaper than ``BaseHTTPMiddleware``): body size limit and request timing.

* **Body limit**: a ``Content-Length`` above ``max_body_bytes`` is refused with 413 before the
  body is read; a body without a length (chunked) is counted as it streams and refused with
  413 as soon as it passes the limit.
* **Timing**: ``judgefuse_http_request_duration_seconds`` per method, route template and status.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from judgefuse.service.metrics import ServiceMetrics

__all__ = ["BodyLimitMiddleware", "TimingMiddleware"]


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so FastAPI's body parsing re-raises it as is."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body too large: at most {limit} bytes")


def _too_large_body(limit: int) -> bytes:
    return json.dumps({
        "error": f"request body too large: at most {limit} bytes",
        "fields": [{"field": "body", "problem": f"larger than {limit} bytes"}],
    }).encode()


async def _send_413(send: Send, limit: int) -> None:
    body = _too_large_body(limit)
    await send({"type": "http.response.start", "status": 413, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.limit = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.limit
                except ValueError:
                    too_big = False
                if too_big:
                    await _send_413(send, self.limit)
                    return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _BodyTooLarge(self.limit)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if not started:
                await _send_413(send, self.limit)


class TimingMiddleware:
    def __init__(self, app: ASGIApp, *, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            route: Any = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.metrics.http_latency.labels(scope.get("method", "?"), path, str(status)).observe(
                time.perf_counter() - started
            )


class FormAsJsonMiddleware:
    """Treat ``application/x-www-form-urlencoded`` POST bodies under ``/v1/`` as JSON.

    ``curl -d '{...}'`` sends that content type; every API body is JSON, so the README's
    single-curl demo works without ``-H 'Content-Type: application/json'``. A body that is not
    JSON still gets a 422 naming it. (In open mode this also lets a cross-site HTML form post
    to the API; open mode is for local use only, keyed mode needs a header no form can set.)
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope.get("method") == "POST"
            and scope.get("path", "").startswith("/v1/")
        ):
            headers = scope.get("headers", [])
            for i, (name, value) in enumerate(headers):
                if name == b"content-type" and value.split(b";")[0].strip().lower() == (
                    b"application/x-www-form-urlencoded"
                ):
                    headers = list(headers)
                    headers[i] = (b"content-type", b"application/json")
                    scope = {**scope, "headers": headers}
                    break
        await self.app(scope, receive, send)
