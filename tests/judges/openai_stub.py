"""A scripted OpenAI-compatible chat-completions server on loopback, for tests and benchmarks.

Each POST to ``/v1/chat/completions`` takes the next scripted action from a queue (or asks
``handler(body)`` when the queue is empty and a handler is set, else uses ``default``):

* :class:`Reply`   a completion: texts (one per choice, cycled to ``n``), first-token top
                   logprobs, usage, an optional delay before answering;
* :class:`Status`  an error status with an OpenAI-shaped error body (and Retry-After);
* :class:`Hang`    never answer (until the server stops), to drive client timeouts;
* :class:`Close`   drop the connection without a response;
* :class:`Garbage` a 200 whose body is not JSON.

Server-wide switches: ``reject_n`` (400 with ``param: "n"`` when ``n`` > 1, as providers
without multi-choice support do) and ``require_key`` (401 unless the Bearer token matches;
the error message echoes the offered key, as careless providers do, to test redaction).
Every request is recorded (body, headers, arrival time) before the action runs.

Run as a script it serves ``default`` replies until killed, printing ``READY <url>`` first:
the transport benchmark uses that to keep the server's CPU out of the client's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    texts: list[str] | str = "A"
    top_logprobs: list[tuple[str, float]] | None = None
    """The first output token's top-k; sent (for every choice) only when the request asked."""
    usage: tuple[int, int] | None = (12, 1)
    delay_s: float = 0.0
    model: str | None = None


@dataclass
class Status:
    status: int
    message: str = "scripted error"
    param: str | None = None
    retry_after: str | None = None


@dataclass
class Hang:
    seconds: float = 3600.0


@dataclass
class Close:
    pass


@dataclass
class Garbage:
    body: bytes = b"<html>502 bad gateway from some proxy"
    status: int = 200


Action = Reply | Status | Hang | Close | Garbage


@dataclass
class Recorded:
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


class StubServer:
    """The server; ``url`` is the api_base to give clients (``http://127.0.0.1:<port>/v1``)."""

    def __init__(self, *, default: Action | None = None) -> None:
        self.default: Action = default or Reply()
        self.handler: Callable[[dict[str, Any]], Action] | None = None
        self.reject_n = False
        self.require_key: str | None = None
        self.requests: list[Recorded] = []
        self.record = True
        self._queue: deque[Action] = deque()
        self._runner: web.AppRunner | None = None
        self._stopping = asyncio.Event()
        self._ids = itertools.count()
        self.url = ""

    def script(self, *actions: Action) -> StubServer:
        """Queue actions for the next requests, in order."""
        self._queue.extend(actions)
        return self

    async def start(self, port: int = 0) -> StubServer:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port, backlog=1024)
        await site.start()
        sockets = self._runner.addresses
        self.url = f"http://127.0.0.1:{sockets[0][1]}/v1"
        return self

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(400, "body is not JSON")
        if self.record:
            self.requests.append(Recorded(body=body, headers=dict(request.headers)))
        if self.require_key is not None:
            offered = request.headers.get("Authorization", "").removeprefix("Bearer ")
            if offered != self.require_key:
                return self._error(401, f"Incorrect API key provided: {offered}", code="invalid_api_key")
        n = int(body.get("n") or 1)
        if self.reject_n and n > 1:
            return self._error(400, "n not supported", param="n", code="unsupported_value")
        if self._queue:
            action = self._queue.popleft()
        elif self.handler is not None:
            action = self.handler(body)
        else:
            action = self.default
        if isinstance(action, Status):
            headers = {"Retry-After": action.retry_after} if action.retry_after is not None else None
            return self._error(action.status, action.message, param=action.param, headers=headers)
        if isinstance(action, Hang):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=action.seconds)
            return self._error(504, "hang ended")
        if isinstance(action, Close):
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=200)
        if isinstance(action, Garbage):
            return web.Response(status=action.status, body=action.body, content_type="application/json")
        if action.delay_s:
            await asyncio.sleep(action.delay_s)
        return web.Response(body=self._completion(action, body, n), content_type="application/json")

    def _completion(self, reply: Reply, body: dict[str, Any], n: int) -> bytes:
        texts = [reply.texts] if isinstance(reply.texts, str) else list(reply.texts)
        want_logprobs = bool(body.get("logprobs")) and reply.top_logprobs is not None
        choices = []
        for index, text in zip(range(n), itertools.cycle(texts)):
            choice: dict[str, Any] = {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
            if want_logprobs and reply.top_logprobs is not None:
                k = int(body.get("top_logprobs") or 0)
                top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in reply.top_logprobs[:k]]
                first_token, first_lp = reply.top_logprobs[0]
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": first_token,
                            "logprob": first_lp,
                            "bytes": list(first_token.encode()),
                            "top_logprobs": top,
                        }
                    ],
                    "refusal": None,
                }
            else:
                choice["logprobs"] = None
            choices.append(choice)
        data: dict[str, Any] = {
            "id": f"chatcmpl-stub{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body.get("model", "stub"),
            "choices": choices,
            "system_fingerprint": "fp_stub",
        }
        if reply.usage is not None:
            prompt, completion = reply.usage
            data["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        return json.dumps(data).encode()

    @staticmethod
    def _error(
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        error = {"message": message, "type": "invalid_request_error", "param": param, "code": code}
        return web.Response(
            status=status, body=json.dumps({"error": error}).encode(), content_type="application/json", headers=headers
        )


async def _serve_forever(port: int) -> None:
    server = StubServer()
    server.record = False
    await server.start(port)
    print(f"READY {server.url}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve_forever(args.port))


if __name__ == "__main__":
    main()
