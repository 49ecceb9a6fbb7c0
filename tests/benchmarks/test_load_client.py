"""``benchmarks/load_client.py``: the benchmark's HTTP/1.1 load client against a real aiohttp
server on loopback: status, body and ``Retry-After`` read right, keep-alive connections reused,
chunked bodies and ``Connection: close`` handled, a slow answer timed out."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from jf_test_support.loopback_app import serve_app

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from load_client import LoadClient  # noqa: E402


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[int]]]:
    peers: list[int] = []

    async def echo(request: web.Request) -> web.StreamResponse:
        peers.append(request.transport.get_extra_info("peername")[1])  # type: ignore[union-attr]
        body = await request.read()
        if request.path == "/busy":
            return web.json_response({"error": "busy"}, status=429, headers={"Retry-After": "1"})
        if request.path == "/chunked":
            response = web.StreamResponse()
            response.enable_chunked_encoding()
            await response.prepare(request)
            for part in (b"ab", b"cde", body):
                await response.write(part)
            await response.write_eof()
            return response
        if request.path == "/close":
            return web.Response(body=body, headers={"Connection": "close"})
        if request.path == "/slow":
            await asyncio.sleep(1)
        return web.Response(body=body + request.headers.get("X-Tag", "").encode())

    app = web.Application()
    app.router.add_post("/{tail:.*}", echo)
    async with serve_app(app) as base:
        yield base, peers


async def test_answers_and_keep_alive(server: tuple[str, list[int]]) -> None:
    base, peers = server
    client = LoadClient(base)
    try:
        for i in range(5):
            answer = await client.post(base + "/echo", b"x" * i, {"X-Tag": "t"}, 5)
            assert answer == (200, None, b"x" * i + b"t")
        assert len(set(peers)) == 1  # one connection, reused for every request
        assert await client.post(base + "/busy", b"{}", {}, 5) == (429, 1.0, b'{"error": "busy"}')
        assert await client.post(base + "/chunked", b"fg", {}, 5) == (200, None, b"abcdefg")
        assert await client.post(base + "/close", b"z", {}, 5) == (200, None, b"z")
        await client.post(base + "/echo", b"", {}, 5)
        assert len(set(peers)) == 2  # the server closed the first: a new one after it
        answers = await asyncio.gather(*(client.post(base + "/echo", b"c", {}, 5) for _ in range(8)))
        assert {a[0] for a in answers} == {200}  # concurrent requests: one connection each
    finally:
        client.close()


async def test_timeout(server: tuple[str, list[int]]) -> None:
    base, _ = server
    client = LoadClient(base)
    try:
        with pytest.raises(TimeoutError):
            await client.post(base + "/slow", b"", {}, 0.1)
        assert await client.post(base + "/echo", b"ok", {}, 5) == (200, None, b"ok")
    finally:
        client.close()
