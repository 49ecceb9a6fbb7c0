"""A lean HTTP/1.1 load generator client for the gateway benchmarks (keep-alive, POST only).

Why not aiohttp's client: on this machine the load generator shares one core with the judge
stub, and aiohttp's ``ClientSession`` spends ~0.3-0.5 ms of CPU a request. At the rates the
benchmark asks for (``/v1/fuse`` at 150% of its max: well over 1,000 requests/s) the generator
then falls seconds behind its own schedule, and since every latency counts from the scheduled
send, the generator's lateness was reported as the server's (``bench_gateway.py`` printed
"generator late p99 3,352 ms" beside an accepted p99 of 7.9 s). This client writes one
pre-built request (bytes) on an idle keep-alive connection, or a new one when none is idle,
and parses the answer's status line, ``Content-Length``/chunked body and its ``Retry-After``:
a few microseconds of Python a request.
"""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

__all__ = ["Answer", "LoadClient"]

Answer = tuple[int, float | None, bytes]
"""(status, ``Retry-After`` in seconds or None when not sent, body)."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection: at most one request in flight on it."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiter: asyncio.Future[Answer] | None = None
        self.closed = False
        self.reusable = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError(f"connection lost: {exc!r}"))

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.waiter is None or self.waiter.done():
            return
        answer = self._parse()
        if answer is not None:
            self.waiter.set_result(answer)

    def _parse(self) -> Answer | None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return None
        lines = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        length, retry_after, chunked = 0, None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "retry-after":
                try:
                    retry_after = float(value)
                except ValueError:  # an HTTP date: wait one second
                    retry_after = 1.0
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.strip().lower() == "close":
                self.reusable = False
        start = end + 4
        if chunked:
            body, consumed = _dechunk(self.buffer, start)
            if body is None:
                return None
            del self.buffer[:consumed]
            return status, retry_after, body
        if len(self.buffer) - start < length:
            return None
        body = bytes(self.buffer[start:start + length])
        del self.buffer[:start + length]
        return status, retry_after, body


def _dechunk(buffer: bytearray, at: int) -> tuple[bytes | None, int]:
    """(body, bytes consumed) of a complete chunked body starting at ``at``; (None, 0) if not
    all there yet."""
    parts: list[bytes] = []
    while True:
        eol = buffer.find(b"\r\n", at)
        if eol < 0:
            return None, 0
        size = int(bytes(buffer[at:eol]).split(b";", 1)[0], 16)
        if size == 0:
            trailer_end = buffer.find(b"\r\n\r\n", eol)
            if trailer_end < 0:
                return None, 0
            return b"".join(parts), trailer_end + 4
        if len(buffer) < eol + 2 + size + 2:
            return None, 0
        parts.append(bytes(buffer[eol + 2:eol + 2 + size]))
        at = eol + 2 + size + 2


class LoadClient:
    """POSTs to one host: ``await client.post(url, body, headers)`` -> :data:`Answer`.
    Unbounded connections (an open loop must never wait for one); close with :meth:`close`."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], bytes] = {}

    def _head(self, path: str, headers: dict[str, str]) -> bytes:
        key = (path, tuple(sorted(headers.items())))
        head = self._heads.get(key)
        if head is None:
            lines = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
            lines += [f"{k}: {v}" for k, v in headers.items()]
            head = self._heads[key] = ("\r\n".join(lines) + "\r\nContent-Length: ").encode()
        return head

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> Answer:
        """One request; raises ``TimeoutError`` past ``timeout_s`` and ``ConnectionError``."""
        path = urlsplit(url).path or "/"
        connection = await self._connection()
        loop = asyncio.get_running_loop()
        connection.waiter = loop.create_future()
        assert connection.transport is not None
        connection.transport.write(self._head(path, headers) + str(len(body)).encode() + b"\r\n\r\n"
                                   + body)
        try:
            async with asyncio.timeout(timeout_s):
                answer = await connection.waiter
        except BaseException:
            self._drop(connection)
            raise
        connection.waiter = None
        if connection.reusable and not connection.closed:
            self._idle.append(connection)
        else:
            self._drop(connection)
        return answer

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed:
                return connection
            self._all.discard(connection)
        loop = asyncio.get_running_loop()
        _, connection = await loop.create_connection(_Connection, self.host, self.port)
        self._all.add(connection)
        return connection

    def _drop(self, connection: _Connection) -> None:
        self._all.discard(connection)
        if connection.transport is not None:
            connection.transport.close()

    def close(self) -> None:
        for connection in list(self._all):
            self._drop(connection)
        self._idle.clear()
