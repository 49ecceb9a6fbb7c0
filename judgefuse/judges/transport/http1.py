"""A small HTTP/1.1 client for the direct judge path: keep-alive connections over asyncio,
answers parsed by httptools (llhttp, the parser uvicorn serves with).

Why not aiohttp here: a judge call is the gateway's most repeated piece of work (five a verdict
for a five-judge panel), and aiohttp's client spends most of its time on what this path never
uses (cookies, tracing hooks, URL and header objects, redirects, proxies, multipart).
``DirectOpenAIClient`` on aiohttp took 0.25 / 0.19 / 0.23 ms of client CPU a call at 1 / 50 /
200 in flight; on this client 0.13 / 0.11 / 0.13 ms, where a bare aiohttp ``session.post``
takes 0.21 / 0.15 / 0.18 (``benchmarks/bench_transport.py``, same minutes;
``benchmarks/results/bench_transport_http1.txt``).

What it does: ``POST`` (or any method) with a ``Content-Length`` body; answers with a
``Content-Length``, chunked, or read-until-close body; keep-alive reuse unless either side says
``Connection: close``; ``https`` with the default TLS context (certificate and host name
verified); one total timeout a request, covering the wait for a connection, connecting,
sending and the whole answer; a cap on requests in flight (callers wait their turn) and on an
answer's size. What it does not do: proxies, redirects, compression (it asks for ``identity``),
HTTP/2, ``Expect: 100-continue``.

No request is ever sent twice here: a connection that breaks before its answer is complete
fails the call, and the caller's retry policy (with its attempt budget) decides, as with
aiohttp for a ``POST``. Connections the server has closed while idle are skipped (their close
has arrived), and idle ones are dropped after :data:`IDLE_S`.

Failures: :class:`ConnectError` (could not connect, including TLS), :class:`ConnectionBroken`
(the connection closed or reset before the answer was complete; ``body_started`` says whether the
headers had arrived), :class:`ProtocolError` (not HTTP/1.x, or an answer over the size cap), and
``TimeoutError`` from the total timeout. The first three are ``OSError``.
"""

from __future__ import annotations

import asyncio
import math
import ssl
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from judgefuse.errors import JudgefuseError
from judgefuse.places import Places

__all__ = [
    "IDLE_S",
    "ConnectError",
    "ConnectionBroken",
    "HTTPClient",
    "ProtocolError",
    "Response",
]

IDLE_S = 15.0
"""An idle connection older than this is closed instead of reused (aiohttp's default too)."""

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The default cap on one answer's body (a chat completion is kilobytes)."""


class ConnectError(JudgefuseError, OSError):
    """Could not open a connection (refused, no route, name not resolved, TLS handshake)."""


class ConnectionBroken(JudgefuseError, OSError):
    """The connection closed or failed before the answer was complete."""

    def __init__(self, message: str, *, body_started: bool) -> None:
        super().__init__(message)
        self.body_started = body_started


class ProtocolError(JudgefuseError, OSError):
    """The peer did not answer in HTTP/1.x, or its answer was over the size cap."""


@dataclass(frozen=True, slots=True)
class Response:
    """One answer: status, headers (names lower-cased; the last value of a repeated name) and
    the whole body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> bytes:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal
        return (host if self.port == default else f"{host}:{self.port}").encode("idna")


def _split(url: str) -> tuple[_Origin, bytes, bytes]:
    """(origin, request target, ``Host`` header value) of ``url``; kept per URL by the client."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    origin = _Origin(scheme, parts.hostname, port)
    return origin, target.encode(), origin.host_header


def _expire(waiter: asyncio.Future[Response]) -> None:
    """The request's deadline passed: its answer fails with ``TimeoutError``."""
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Connection(asyncio.Protocol):
    """One connection and the answer it is reading (one request at a time)."""

    def __init__(self, max_body: int) -> None:
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._max_body = max_body
        self._waiter: asyncio.Future[Response] | None = None
        self.closed = False
        self.idle_since = 0.0
        self._reset()

    def _reset(self) -> None:
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._size = 0
        self._status = 0
        self._headers_done = False

    # ---- the caller's side
    def send(self, data: bytes, waiter: asyncio.Future[Response]) -> None:
        assert self.transport is not None
        self._reset()
        self._waiter = waiter
        if self.closed:  # closed between the pool's check and now: nothing will answer
            self._settle(ConnectionBroken("connection closed before an answer", body_started=False))
            return
        self.transport.write(data)

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _settle(self, result: Response | BaseException) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None or waiter.done():
            return
        if isinstance(result, BaseException):
            waiter.set_exception(result)
        else:
            waiter.set_result(result)

    # ---- asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport

    def data_received(self, data: bytes) -> None:
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._settle(ProtocolError(f"not an HTTP/1.x answer: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost settles the answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None:
            return
        if self._headers_done and "content-length" not in self._headers \
                and "chunked" not in self._headers.get("transfer-encoding", "").lower():
            self._settle(self._response())  # a body that runs until the connection closes
            return
        reason = f": {exc}" if exc else ""
        self._settle(ConnectionBroken(
            ("connection closed while reading the body" if self._headers_done
             else "connection closed before an answer") + reason, body_started=self._headers_done))

    # ---- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._headers_done = True
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > self._max_body:
            self._settle(ProtocolError(f"answer larger than {self._max_body} bytes"))
            self.close()
            return
        self._body.append(body)

    def on_message_complete(self) -> None:
        if not self._parser.should_keep_alive():
            self.closed = True  # read, then closed by the client (see HTTPClient._release)
        self._settle(self._response())

    def _response(self) -> Response:
        body = self._body[0] if len(self._body) == 1 else b"".join(self._body)
        return Response(self._status, self._headers, body)


class HTTPClient:
    """Keep-alive connections for any number of origins, at most ``max_connections`` requests
    in flight (one connection each); as many idle connections kept for reuse. Create and use it
    inside one running event loop; :meth:`aclose` closes every connection."""

    def __init__(self, *, max_connections: int = 100, max_response_bytes: int = MAX_RESPONSE_BYTES,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be >= 1, got {max_connections}")
        self._max_connections = max_connections
        self._max_body = max_response_bytes
        self._ssl = ssl_context
        self._places = Places(max_connections, math.inf, max_waiting=sys.maxsize)
        """The ``max_connections`` places in flight; callers past them wait in order, each up to
        its call's deadline (no bound on how many wait: each has its own timeout)."""
        self._idle: dict[_Origin, list[_Connection]] = {}
        self._idle_count = 0
        self._busy: set[_Connection] = set()
        self._targets: dict[str, tuple[_Origin, bytes, bytes]] = {}
        self._closed = False

    async def request(self, method: str, url: str, body: bytes = b"", *,
                      headers: Mapping[str, str] | None = None, timeout_s: float) -> Response:
        """Send one request and read its whole answer within ``timeout_s`` seconds."""
        if self._closed:
            raise RuntimeError("HTTPClient is closed")
        split = self._targets.get(url)
        if split is None:
            split = _split(url)
            if len(self._targets) < 256:
                self._targets[url] = split
        origin, target, host = split
        head = [method.encode(), b" ", target, b" HTTP/1.1\r\nHost: ", host,
                b"\r\nAccept-Encoding: identity\r\nContent-Length: ", str(len(body)).encode(), b"\r\n"]
        for name, value in (headers or {}).items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
                raise ValueError(f"header {name!r} has a line break or a bad name")
            head += (name.encode("latin-1"), b": ", value.encode("latin-1"), b"\r\n")
        head.append(b"\r\n")
        data = b"".join(head) + body
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if not self._places.try_take() and not await self._places.acquire(deadline - loop.time()):
            raise TimeoutError(f"no connection place free within {timeout_s:g} s")
        try:
            conn = self._reuse(origin)
            if conn is None:
                async with asyncio.timeout_at(deadline):
                    conn = await self._connect(origin)
            return await self._exchange(loop, origin, conn, data, deadline)
        finally:
            self._places.release()

    async def _exchange(self, loop: asyncio.AbstractEventLoop, origin: _Origin, conn: _Connection,
                        data: bytes, deadline: float) -> Response:
        """Send ``data`` on ``conn`` and read the answer; past ``deadline`` it fails with
        ``TimeoutError`` (one timer on the answer's future: a third of ``asyncio.timeout``'s
        cost, paid on every judge call) and the connection is closed."""
        waiter: asyncio.Future[Response] = loop.create_future()
        timer = loop.call_at(deadline, _expire, waiter)
        self._busy.add(conn)
        try:
            conn.send(data, waiter)
            response = await waiter
        except BaseException:  # broken, timed out, cancelled, malformed: the answer is unread
            conn.close()
            raise
        finally:
            timer.cancel()
            self._busy.discard(conn)
        self._release(origin, conn)
        return response

    def _reuse(self, origin: _Origin) -> _Connection | None:
        idle = self._idle.get(origin)
        now = time.monotonic()
        while idle:
            conn = idle.pop()
            self._idle_count -= 1
            if not conn.closed and now - conn.idle_since <= IDLE_S:
                return conn
            conn.close()
        return None

    def _release(self, origin: _Origin, conn: _Connection) -> None:
        if conn.closed or self._closed or self._idle_count >= self._max_connections:
            conn.close()
            return
        conn.idle_since = time.monotonic()
        self._idle.setdefault(origin, []).append(conn)
        self._idle_count += 1

    async def _connect(self, origin: _Origin) -> _Connection:
        loop = asyncio.get_running_loop()
        tls: Any = None
        if origin.scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            tls = self._ssl
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(self._max_body), origin.host, origin.port,
                ssl=tls, server_hostname=origin.host if tls else None)
        except OSError as exc:  # ssl.SSLError (a failed handshake) is one too
            raise ConnectError(f"cannot connect to {origin.host}:{origin.port}: {exc}") from exc
        return conn

    async def aclose(self) -> None:
        """Close every connection, idle or in use (their requests fail)."""
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        self._idle_count = 0
        for conn in list(self._busy):
            conn.close()
        await asyncio.sleep(0)  # let the transports' close callbacks run
