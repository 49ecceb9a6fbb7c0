"""The direct path's HTTP/1.1 client against real servers on loopback: raw asyncio servers that
answer exactly as scripted (keep-alive, chunked, read-until-close, broken, slow, not HTTP), and
a TLS server with a certificate made for the test."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from judgefuse.judges.transport import http1
from judgefuse.judges.transport.http1 import (
    ConnectError,
    ConnectionBroken,
    HTTPClient,
    ProtocolError,
    Response,
)

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[bool]]
"""Answers one request (already read) on a connection; returns whether to keep reading."""


class Server:
    """A loopback server reading one request at a time and answering through ``handler``;
    counts connections, requests and the most requests in flight at once."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.requests = 0
        self.inflight = 0
        self.most_inflight = 0
        self.bodies: list[bytes] = []
        self.heads: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.bodies.append(await reader.readexactly(length))
                self.heads.append(head)
                self.requests += 1
                self.inflight += 1
                self.most_inflight = max(self.most_inflight, self.inflight)
                try:
                    keep = await self.handler(reader, writer, self.requests)
                finally:
                    self.inflight -= 1
                if not keep:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self, ssl_context: ssl.SSLContext | None = None) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=ssl_context)
        port = self.server.sockets[0].getsockname()[1]
        return f"{'https' if ssl_context else 'http'}://127.0.0.1:{port}/v1/chat/completions"


def ok(body: bytes = b'{"ok": true}', extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


async def answer(data: bytes, keep: bool = True) -> Handler:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> bool:
        writer.write(data)
        await writer.drain()
        return keep

    return handler


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[tuple[Server, str]]]]:
    servers: list[Server] = []

    async def start(handler: Handler, ssl_context: ssl.SSLContext | None = None) -> tuple[Server, str]:
        server = Server(handler)
        url = await server.start(ssl_context)
        servers.append(server)
        return server, url

    yield start
    for server in servers:
        assert server.server is not None
        server.server.close()


@pytest.fixture
async def client() -> AsyncIterator[HTTPClient]:
    made = HTTPClient(max_connections=8)
    yield made
    await made.aclose()


async def test_requests_reuse_one_connection_and_send_what_was_asked(serve, client) -> None:
    server, url = await serve(await answer(ok()))
    for i in range(20):
        response = await client.request("POST", url, b'{"i": %d}' % i, headers={"X-Key": "v"}, timeout_s=60)
        assert (response.status, response.body) == (200, b'{"ok": true}')
        assert response.headers["content-length"] == "12"
    assert server.connections == 1 and server.requests == 20
    assert server.bodies[7] == b'{"i": 7}'
    head = server.heads[0].decode()
    assert head.startswith("POST /v1/chat/completions HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{url.split(':')[2].split('/')[0]}\r\n" in head and "X-Key: v\r\n" in head


async def test_chunked_and_read_until_close_bodies_are_read_whole(serve, client) -> None:
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    _, url = await serve(await answer(chunked))
    assert (await client.request("POST", url, b"{}", timeout_s=60)).body == b"hello world"
    until_close = b"HTTP/1.0 200 OK\r\n\r\n" + b"x" * 100_000
    server, url = await serve(await answer(until_close, keep=False))
    assert (await client.request("POST", url, b"{}", timeout_s=60)).body == b"x" * 100_000
    assert (await client.request("POST", url, b"{}", timeout_s=60)).body == b"x" * 100_000
    assert server.connections == 2  # the body ran until the close: the connection is not reused


async def test_connection_close_is_honoured(serve, client) -> None:
    server, url = await serve(await answer(ok(extra=b"Connection: close\r\n"), keep=False))
    for _ in range(3):
        assert (await client.request("POST", url, b"{}", timeout_s=60)).status == 200
    assert server.connections == 3


async def test_a_connection_closed_before_answering_fails_the_call_and_is_not_repeated(serve, client) -> None:
    """The server reads a request and closes without answering (a reused connection, then a new
    one): each call fails once and the server sees each request once; the attempt budget is the
    caller's retry policy's."""

    async def handler(reader, writer, n: int) -> bool:
        if n >= 2:
            return False  # close without a byte of answer
        writer.write(ok())
        await writer.drain()
        return True

    server, url = await serve(handler)
    assert (await client.request("POST", url, b"{}", timeout_s=60)).status == 200
    for requests in (2, 3):  # on the kept connection, then on a new one
        with pytest.raises(ConnectionBroken) as caught:
            await client.request("POST", url, b"{}", timeout_s=60)
        assert not caught.value.body_started
        assert server.requests == requests
    assert server.connections == 2


async def test_a_body_cut_short_is_a_broken_connection_after_the_headers(serve, client) -> None:
    _, url = await serve(await answer(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789", keep=False))
    with pytest.raises(ConnectionBroken) as caught:
        await client.request("POST", url, b"{}", timeout_s=60)
    assert caught.value.body_started


async def test_the_timeout_covers_the_whole_answer_and_drops_the_connection(serve, client) -> None:
    async def handler(reader, writer, n: int) -> bool:
        if n == 1:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234")  # then nothing
            await writer.drain()
            await asyncio.sleep(5)
        writer.write(ok())
        await writer.drain()
        return True

    server, url = await serve(handler)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(TimeoutError):
        await client.request("POST", url, b"{}", timeout_s=0.3)
    assert 0.25 < loop.time() - started < 2
    assert (await client.request("POST", url, b"{}", timeout_s=60)).status == 200
    assert server.connections == 2  # the half-read connection was not handed out again


async def slow(reader, writer, n: int) -> bool:
    """Answers each request after 50 ms (so calls overlap)."""
    await asyncio.sleep(0.05)
    writer.write(ok())
    await writer.drain()
    return True


async def test_requests_in_flight_are_capped(serve) -> None:
    server, url = await serve(slow)
    capped = HTTPClient(max_connections=3)
    try:
        answers = await asyncio.gather(*(capped.request("POST", url, b"{}", timeout_s=60) for _ in range(12)))
    finally:
        await capped.aclose()
    assert [a.status for a in answers] == [200] * 12
    assert server.most_inflight == 3 and server.connections == 3


async def test_callers_that_give_up_waiting_for_a_place_leave_the_cap_whole(serve) -> None:
    """A caller timed out or cancelled while in line takes no place with it, and one handed a
    place at the moment it is cancelled passes the place on: the cap stays exact and nobody
    behind it is stranded."""
    server, url = await serve(slow)
    capped = HTTPClient(max_connections=1)
    handed: asyncio.Task[Response] | None = None

    async def holder() -> Response:
        answer = await capped.request("POST", url, b"{}", timeout_s=60)
        assert handed is not None
        handed.cancel()  # its place was handed to it as this call ended; it has not run since
        return answer

    try:
        first = asyncio.create_task(holder())
        await asyncio.sleep(0.01)
        with pytest.raises(TimeoutError):  # in line the whole time: times out without a place
            await capped.request("POST", url, b"{}", timeout_s=0.02)
        in_line = asyncio.create_task(capped.request("POST", url, b"{}", timeout_s=60))
        await asyncio.sleep(0)
        in_line.cancel()  # cancelled in line
        handed = asyncio.create_task(capped.request("POST", url, b"{}", timeout_s=60))
        last = asyncio.create_task(capped.request("POST", url, b"{}", timeout_s=2))
        await asyncio.sleep(0)
        results = await asyncio.gather(first, in_line, handed, last, return_exceptions=True)
        server.most_inflight = 0
        after = await asyncio.gather(*(capped.request("POST", url, b"{}", timeout_s=60) for _ in range(3)))
    finally:
        await capped.aclose()
    assert isinstance(results[0], Response) and results[0].status == 200
    assert isinstance(results[1], asyncio.CancelledError) and isinstance(results[2], asyncio.CancelledError)
    assert isinstance(results[3], Response) and results[3].status == 200  # not stranded behind it
    assert [a.status for a in after] == [200] * 3
    assert server.most_inflight == 1 and server.requests == 5


async def test_idle_connections_expire(serve, client, monkeypatch) -> None:
    server, url = await serve(await answer(ok()))
    monkeypatch.setattr(http1, "IDLE_S", 0.05)
    await client.request("POST", url, b"{}", timeout_s=60)
    await asyncio.sleep(0.1)
    await client.request("POST", url, b"{}", timeout_s=60)
    assert server.connections == 2


@pytest.mark.parametrize("reply", [b"SSH-2.0-OpenSSH_9.6\r\n\r\n", b"HTTP/1.1 ok\r\n\r\n"])
async def test_an_answer_that_is_not_http_is_a_protocol_error(serve, client, reply: bytes) -> None:
    _, url = await serve(await answer(reply))
    with pytest.raises(ProtocolError):
        await client.request("POST", url, b"{}", timeout_s=60)


async def test_an_answer_over_the_size_cap_is_refused(serve) -> None:
    _, url = await serve(await answer(ok(b"x" * 5000)))
    small = HTTPClient(max_response_bytes=4096)
    try:
        with pytest.raises(ProtocolError, match="larger than 4096"):
            await small.request("POST", url, b"{}", timeout_s=60)
        # the refused connection is gone; a fresh one answers the same way
        with pytest.raises(ProtocolError):
            await small.request("POST", url, b"{}", timeout_s=60)
    finally:
        await small.aclose()


async def test_no_server_is_a_connect_error(client) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
            await client.request("POST", f"http://127.0.0.1:{port}/x", b"{}", timeout_s=60)


@pytest.mark.parametrize("headers", [{"X-A": "v\r\nX-Injected: 1"}, {"X-A\nB": "v"}, {"X:A": "v"}])
async def test_a_header_with_a_line_break_is_refused_before_sending(client, headers) -> None:
    with pytest.raises(ValueError, match="line break or a bad name"):
        await client.request("POST", "http://127.0.0.1:9/x", b"{}", headers=headers, timeout_s=60)


async def test_bad_urls_and_a_closed_client_are_refused(client) -> None:
    for url in ("ftp://example.com/x", "http:///x", "localhost:80/x"):
        with pytest.raises(ValueError, match="not an http"):
            await client.request("POST", url, b"{}", timeout_s=60)
    await client.aclose()
    with pytest.raises(RuntimeError, match="closed"):
        await client.request("POST", "http://127.0.0.1:9/x", b"{}", timeout_s=60)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1 (openssl's command line)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("the TLS test needs the openssl command (apt-get install openssl)")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


async def test_https_verifies_the_certificate(serve, certificate) -> None:
    cert, key = certificate
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    server, url = await serve(await answer(ok()), server_side)
    trusting = HTTPClient(ssl_context=ssl.create_default_context(cafile=str(cert)))
    default = HTTPClient()
    try:
        for _ in range(3):
            assert (await trusting.request("POST", url, b"{}", timeout_s=60)).body == b'{"ok": true}'
        assert server.connections == 1
        with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
            await default.request("POST", url, b"{}", timeout_s=60)  # not signed by a known CA
    finally:
        await trusting.aclose()
        await default.aclose()


def test_the_client_runs_on_uvloop_as_served() -> None:
    """``judgefuse serve`` runs on uvloop, whose transports are not ``asyncio.Transport``s."""
    uvloop = pytest.importorskip("uvloop")

    async def main() -> tuple[int, int, int]:
        server = Server(await answer(ok()))
        url = await server.start()
        client = HTTPClient()
        try:
            statuses = [(await client.request("POST", url, b"{}", timeout_s=60)).status for _ in range(3)]
        finally:
            await client.aclose()
            assert server.server is not None
            server.server.close()
        return statuses.count(200), server.connections, server.requests

    assert uvloop.run(main()) == (3, 1, 3)


async def test_closing_the_client_fails_the_calls_in_flight_and_keeps_no_connection(serve) -> None:
    """``aclose`` with calls waiting for their answers: each fails as a broken connection (the
    caller maps it to ``ConnectionFailed``), none hangs, and every connection is closed."""
    async def slow(reader, writer, n: int) -> bool:
        if n == 1:
            writer.write(ok())
            await writer.drain()
            return True
        await asyncio.sleep(5)
        return False

    server, url = await serve(slow)
    client = HTTPClient(max_connections=4)
    await client.request("POST", url, b"{}", timeout_s=60)  # one idle connection in the pool
    calls = [asyncio.create_task(client.request("POST", url, b"{}", timeout_s=60)) for _ in range(3)]
    while server.requests < 4:
        await asyncio.sleep(0.01)
    await client.aclose()
    results = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 2)
    assert all(isinstance(r, ConnectionBroken) and not r.body_started for r in results), results
    assert client._idle_count == 0 and not client._busy
