"""The wait-for-the-loop gate (judgefuse.service.web.backpressure, ``server.shed_wait_s``): the HTTP
protocol ``judgefuse serve`` runs stamps when a request's headers were read, and a guarded request
that reaches the gate too long after that stamp is refused with 429 + Retry-After (limit
``shed_wait_s``) before the app sees it; a fresh one, an unstamped one and any with the gate off
pass."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import httpx
import pytest
import uvicorn
from jf_test_support import app_support as S

from judgefuse.service.commands.serve import uvicorn_config
from judgefuse.service.kernel.metrics import ServiceMetrics
from judgefuse.service.web import backpressure
from judgefuse.service.web.backpressure import BackpressureMiddleware
from judgefuse.service.web.server_timeouts import READ_AT


async def test_the_served_protocol_stamps_when_each_request_was_read(tmp_path: Path):
    stamps: list[tuple[float, float]] = []

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        stamps.append((scope["extensions"][READ_AT], time.monotonic()))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    port = S.free_port()
    settings = S.make_settings(tmp_path, [])
    server = uvicorn.Server(uvicorn_config(app, settings, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        await S.wait_started(server, task)
        before = time.monotonic()
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            for _ in range(3):  # one kept-alive connection: each request gets its own stamp
                assert (await client.post("/v1/fuse", content=b"{}")).status_code == 200
        after = time.monotonic()
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, timeout=S.START_WITHIN_S)
    assert len(stamps) == 3 and len({read for read, _ in stamps}) == 3
    assert all(before <= read <= reached <= after for read, reached in stamps), stamps


async def call(middleware: BackpressureMiddleware, path: str, read_ago_s: float | None) -> list[dict]:
    """One request through ``middleware``; its headers read ``read_ago_s`` ago (None: no stamp)."""
    scope = {"type": "http", "method": "POST", "path": path, "headers": []}
    if read_ago_s is not None:
        scope["extensions"] = {READ_AT: time.monotonic() - read_ago_s}
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message):
        sent.append(message)

    await middleware(scope, receive, send)
    return sent


@pytest.mark.parametrize("path", ["/v1/fuse", "/v1/judge/batch"])
async def test_a_request_that_waited_too_long_for_the_loop_is_refused(tmp_path: Path, monkeypatch, path):
    monkeypatch.setattr(backpressure, "SHED_MIN_INFLIGHT", 0)  # no queue of this test's own
    reached: list[str] = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    settings = S.make_settings(tmp_path, [], server={"shed_wait_s": 0.02})
    metrics = ServiceMetrics()
    gate = BackpressureMiddleware(app, settings=settings, metrics=metrics)
    refused = await call(gate, path, 0.5)
    assert refused[0]["status"] == 429 and reached == []
    assert dict(refused[0]["headers"])[b"retry-after"] == b"1"
    body = json.loads(refused[1]["body"])
    assert body["limit"] == "shed_wait_s" and body["retry_after_s"] == 1
    assert "waited" in body["error"] and "event loop" in body["error"]
    assert 'limit="shed_wait_s"' in metrics.render().decode()
    for ago in (0.0, None):  # fresh, or not stamped (another server): admitted
        assert (await call(gate, path, ago))[0]["status"] == 200
    assert (await call(gate, "/v1/monitor", 0.5))[0]["status"] == 200  # not a guarded route
    assert (await call(gate, "/v1/feedback", 0.5))[0]["status"] == 200  # labels queue at their own gate
    off = BackpressureMiddleware(app, settings=S.make_settings(tmp_path, [], server={"shed_wait_s": 0}),
                                 metrics=metrics)
    assert (await call(off, path, 0.5))[0]["status"] == 200
    assert reached == [path, path, "/v1/monitor", "/v1/feedback", path]


async def test_the_wait_for_the_loop_is_spent_from_the_work_gates_budget(tmp_path: Path, monkeypatch):
    """``work_wait_s`` counts from when the headers were read: with the one working place held,
    a request read 1 s ago may wait only what is left of 2 s for it, one read just now the
    whole 2 s, and one read 2.5 s ago (past the budget) is refused at once (before it, each
    gate took its own wait, and past /v1/fuse's capacity the two added up to over 100 ms).
    With fewer than ``SHED_MIN_INFLIGHT`` in flight the wait for the loop is not blamed on a
    queue: the one read 2.5 s ago then waits the whole 2 s too. The budget is seconds wide so
    that a busy machine's late timers (tens of ms) cannot move a wait across a bound."""
    release = asyncio.Event()

    async def app(scope, receive, send):
        if scope["path"] == "/v1/judge":
            await release.wait()  # holds the one working place
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    settings = S.make_settings(tmp_path, [], server={
        "max_inflight_work": 1, "work_wait_s": 2.0, "shed_wait_s": 10.0})
    gate = BackpressureMiddleware(app, settings=settings, metrics=ServiceMetrics())
    holder = asyncio.create_task(call(gate, "/v1/judge", 0.0))
    await asyncio.sleep(0.01)
    started = time.monotonic()
    assert (await call(gate, "/v1/fuse", 2.5))[0]["status"] == 429  # 2 in flight: no queue
    assert time.monotonic() - started >= 1.95
    monkeypatch.setattr(backpressure, "SHED_MIN_INFLIGHT", 0)  # a queue of requests
    waits: dict[float, float] = {}
    for ago in (1.0, 0.0, 2.5):
        started = time.monotonic()
        refused = await call(gate, "/v1/fuse", ago)
        waits[ago] = time.monotonic() - started
        assert refused[0]["status"] == 429, ago
        body = json.loads(refused[1]["body"])
        assert body["limit"] == "max_inflight_work"
        assert "within 2000 ms of this request's headers being read" in body["error"], body
    assert 0.95 <= waits[1.0] < 1.9, waits  # what was left of the budget: 1 s
    assert waits[0.0] >= 1.95, waits  # the whole budget
    assert waits[2.5] < 0.9, waits  # none left: refused at once
    release.set()
    assert (await holder)[0]["status"] == 200
    assert (await call(gate, "/v1/fuse", 0.0))[0]["status"] == 200  # the place is free again
