"""Backpressure over real HTTP (judgefuse.service.web.backpressure): a label/review request past
the storage gate gets 429 + Retry-After at once, one within it waits and succeeds; an event loop
driven past its capacity sheds /v1/judge and /v1/fuse with 429 + Retry-After and never a 5xx;
the loop's lag is a Prometheus histogram on /metrics."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support.live_gateway import API_KEY, live_gateway
from jf_test_support.panel_support import UNANIMOUS
from jf_test_support.waiting import poll_until

from judgefuse.places import Places
from judgefuse.service.kernel.sojourn import Working
from judgefuse.service.web import backpressure
from judgefuse.service.web.backpressure import BackpressureMiddleware, LabelGate, guarded_route

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
FUSE = {**PAIR, "panel": "ext", "votes": UNANIMOUS}
"""A /v1/fuse body: no judge is called."""
HEADERS = {"Authorization": f"Bearer {API_KEY}"}


def hold_open(url: str, path: str) -> socket.socket:
    """A POST to ``path`` whose body never finishes: it holds its gate place until closed
    (the gates run before the body is read)."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n"
                 "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode())
    return sock


async def wait_until(condition) -> None:
    if not await poll_until(condition, every_s=0.01):
        raise AssertionError("condition not reached")


def backpressure_of(gw) -> BackpressureMiddleware:
    """The running app's backpressure middleware (its stack is built on the first request)."""
    app = gw.app.middleware_stack
    while not isinstance(app, BackpressureMiddleware):
        app = app.app
    return app


def wait_in_thread(condition, timeout_s: float = 30.0) -> None:
    """Poll ``condition`` from the test's thread (the gateway's loop may be held on purpose)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.01)


def gate_of(gw) -> LabelGate:
    """The running app's label gate (its middleware stack is built on the first request)."""
    app = gw.app.middleware_stack
    while not hasattr(app, "labels"):
        app = app.app
    return app.labels


def test_guarded_routes():
    assert guarded_route("POST", "/v1/judge") == guarded_route("POST", "/v1/fuse/batch") == "judging"
    for method, path in [("POST", "/v1/feedback"), ("GET", "/v1/review/next"),
                         ("POST", "/v1/review/skip"), ("POST", "/review/label"), ("POST", "/review/skip")]:
        assert guarded_route(method, path) == "labels", path
    assert guarded_route("GET", "/v1/judge") is None
    assert guarded_route("GET", "/v1/review/stats") is None
    assert guarded_route("GET", "/metrics") is None


async def test_label_gate_hands_places_in_order_and_refuses_past_its_wait():
    gate = LabelGate(1, wait_s=0.2)
    assert await gate.acquire()
    waiter = asyncio.create_task(gate.acquire())
    await asyncio.sleep(0.01)
    assert gate.waiting == 1
    gate.release()  # the place passes to the waiter
    assert await waiter and gate.held == 1
    assert not await gate.acquire()  # held, waits 0.2 s, refused
    gate.release()
    assert gate.held == 0 and await gate.acquire()


@pytest.mark.parametrize("route", [
    ("POST", "/v1/feedback", {"verdict_id": "nope", "label": "A"}),
    ("GET", "/v1/review/next?panel=ext", None),
    ("POST", "/v1/review/skip", {"verdict_id": "nope"}),
    ("POST", "/review/label", {"verdict_id": "nope", "label": "A"}),
    ("POST", "/review/skip", {"verdict_id": "nope"}),
])
def test_label_routes_past_the_storage_gate_get_429_with_retry_after(tmp_path: Path, route):
    method, path, body = route
    with live_gateway(tmp_path, server={"max_inflight_labels": 1, "label_wait_s": 0.0}) as gw:
        holder = hold_open(gw.url, "/v1/feedback")
        try:
            gw.run(wait_until(lambda: gate_of(gw).held == 1))
            with httpx.Client(base_url=gw.url, headers=HEADERS) as client:
                refused = client.request(method, path, json=body)
                assert refused.status_code == 429, refused.text
                assert refused.headers["Retry-After"] == "1"
                error = refused.json()
                assert error["limit"] == "max_inflight_labels" and error["max_inflight"] == 1
                assert error["retry_after_s"] == 1
                # the judging routes have no storage gate
                assert client.post("/v1/fuse", json=FUSE).status_code == 200
        finally:
            holder.close()
        gw.run(wait_until(lambda: gate_of(gw).held == 0))
        with httpx.Client(base_url=gw.url, headers=HEADERS) as client:
            again = client.request(method, path, json=body)
            assert again.status_code != 429 and again.status_code < 500, again.text


def test_a_label_burst_past_the_gate_waits_instead_of_failing(tmp_path: Path):
    """150 concurrent labels through a gate of 8: every one is answered 200 (none refused).
    (The loop's gate is off here: on a shared machine other processes can keep this loop late.)"""
    with live_gateway(tmp_path, server={"max_inflight_labels": 8, "label_wait_s": 10.0,
                                        "shed_loop_lag_s": 0}) as gw:

        async def burst() -> list[int]:
            ids = []
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS) as client:
                for _ in range(3):
                    made = await client.post("/v1/fuse/batch", json={"items": [FUSE] * 50})
                    ids += [r["verdict"]["id"] for r in made.json()["results"]]
            # a fresh client: 150 new connections at once (no idle keep-alive one to reuse)
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=60,
                                         limits=httpx.Limits(max_connections=200)) as client:
                answers = await asyncio.gather(*(
                    client.post("/v1/feedback", json={"verdict_id": i, "label": "A"}) for i in ids))
            return [a.status_code for a in answers]

        statuses = asyncio.run(burst())
        assert statuses == [200] * 150
        assert gate_of(gw).held == 0


def stall_the_loop(gw, stall_s: float) -> Callable[[], None]:
    """Keep the gateway's loop busy on purpose: a callback that holds it for ``stall_s`` (a
    blocking sleep, as a long fit on the loop would) and schedules itself again at once. Every
    timer of the lag monitor then fires at least ``stall_s`` minus its interval late, however
    fast or busy the machine is. Returns the function that stops it."""
    stopped = threading.Event()

    def stall() -> None:
        if stopped.is_set():
            return
        time.sleep(stall_s)
        gw.loop.call_soon(stall)

    gw.loop.call_soon_threadsafe(stall)
    return stopped.set


def test_a_loop_past_capacity_sheds_judging_with_429_and_no_5xx(tmp_path: Path, monkeypatch):
    """A controlled load, not the machine's speed: 4 requests held in flight (their bodies never
    finish) and the loop held 30 ms at a time by a stub stall, against a 5 ms lag target. Once
    the lag monitor finds a whole window late, /v1/judge and /v1/fuse are shed (429 +
    Retry-After, a body naming shed_loop_lag_s, never a 5xx); with the stall stopped and the
    holders gone, both are served again; the lag histogram is on /metrics."""
    monkeypatch.setattr(backpressure, "SHED_MIN_INFLIGHT", 4)
    with live_gateway(tmp_path, server={"shed_loop_lag_s": 0.005, "max_inflight_work": 0}) as gw:
        lag = gw.app.state.metrics.loop_lag
        holders = [hold_open(gw.url, "/v1/fuse") for _ in range(4)]
        try:
            gw.run(wait_until(lambda: backpressure_of(gw).inflight == 4))
            stop_stalling = stall_the_loop(gw, 0.03)
            try:
                wait_in_thread(lambda: lag.overloaded(0.005))
                with httpx.Client(base_url=gw.url, headers=HEADERS, timeout=30) as client:
                    answers = [client.post(path, json=body)
                               for path, body in [("/v1/judge", PAIR), ("/v1/fuse", FUSE)] * 2]
            finally:
                stop_stalling()
        finally:
            for holder in holders:
                holder.close()
        statuses = [a.status_code for a in answers]
        assert statuses == [429] * 4, [a.text for a in answers]
        assert {a.headers["Retry-After"] for a in answers} == {"1"}
        assert {a.json()["limit"] for a in answers} == {"shed_loop_lag_s"}
        assert all("max_inflight" not in a.json() for a in answers)
        gw.run(wait_until(lambda: backpressure_of(gw).inflight == 0))
        with httpx.Client(base_url=gw.url, headers=HEADERS, timeout=30) as client:
            assert client.post("/v1/fuse", json=FUSE).status_code == 200
            assert client.post("/v1/judge", json=PAIR).status_code == 200
            metrics = client.get("/metrics", headers={"Authorization": f"Bearer {S.METRICS_TOKEN}"}).text
        count = next(line for line in metrics.splitlines()
                     if line.startswith("judgefuse_event_loop_lag_seconds_count"))
        assert float(count.split()[-1]) >= 20  # at least two 200 ms windows of samples
        assert 'judgefuse_admission_rejected_total{limit="shed_loop_lag_s",tenant="-"} 4.0' in metrics


def test_verdicts_queueing_in_the_app_are_shed_with_429(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The in-app time gate: with its target set below what any verdict takes (1 us) and its
    in-flight floor at 1, 32 callers on /v1/fuse keep every verdict of a window over the target,
    so some are refused (429 + Retry-After, limit shed_sojourn_s) and none fails with a 5xx; the
    loop's own gate is off (target 0) so it cannot be the one shedding."""
    monkeypatch.setattr(backpressure, "SHED_MIN_INFLIGHT", 1)  # the client, in-process, is the queue
    with live_gateway(tmp_path, server={"shed_loop_lag_s": 0.0, "shed_sojourn_s": 1e-6,
                                        "max_inflight_work": 0}) as gw:
        gw.app.state.metrics.sojourn.min_samples = 1  # this test's own rate, client in-process

        async def load() -> list[httpx.Response]:
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS,
                                         limits=httpx.Limits(max_connections=64)) as client:
                stop = asyncio.get_running_loop().time() + 1.5
                answers: list[httpx.Response] = []

                async def caller() -> None:
                    while asyncio.get_running_loop().time() < stop:
                        answers.append(await client.post(
                            "/v1/fuse", json=FUSE))

                await asyncio.gather(*(caller() for _ in range(32)))
                return answers

        answers = asyncio.run(load())
        sojourn = gw.app.state.metrics.sojourn
        statuses = [a.status_code for a in answers]
        assert all(s < 500 for s in statuses) and statuses.count(200) > 0
        shed = [a for a in answers if a.status_code == 429]
        assert shed, f"verdicts were never found queueing ({statuses.count(200)} answered, last min {sojourn._last_min})"
        assert {a.json()["limit"] for a in shed} == {"shed_sojourn_s"}
        assert {a.headers["Retry-After"] for a in shed} == {"1"}


def test_below_capacity_nothing_is_shed(tmp_path: Path):
    """The default target (10 ms) with 4 callers in a row: no 429."""
    with live_gateway(tmp_path) as gw:

        async def load() -> list[int]:
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS) as client:
                async def caller() -> list[int]:
                    return [(await client.post("/v1/fuse", json=FUSE)).status_code
                            for _ in range(25)]
                return [s for got in await asyncio.gather(*(caller() for _ in range(4))) for s in got]

        assert asyncio.run(load()) == [200] * 100
        assert gw.app.state.metrics.loop_lag.samples > 0


def test_working_counts_a_request_except_while_it_waits_for_its_judges():
    working = Working()
    with Working.away():  # outside a counted request: nothing to step out of
        assert working.count == 0
    with working.enter():
        assert working.count == 1
        with Working.away():
            assert working.count == 0
        assert working.count == 1
        with pytest.raises(RuntimeError), Working.away():
            raise RuntimeError("a judge call failed")
        assert working.count == 1
    assert working.count == 0


async def test_places_taken_past_the_limit_are_not_handed_on_until_back_under_it():
    """``take`` (admitted work coming back from its judges) may hold more than the limit; a
    place given back then only lowers the count, and a waiter gets one only once fewer than the
    limit would be held without it."""
    places = Places(2, wait_s=1.0)
    assert await places.acquire() and await places.acquire()
    places.take()  # 3 held, limit 2
    waiter = asyncio.create_task(places.acquire())
    await asyncio.sleep(0.01)
    assert places.waiting == 1
    places.release()  # 2 held: still no room
    await asyncio.sleep(0.01)
    assert not waiter.done() and places.held == 2
    places.release()  # room: the place goes straight to the waiter
    assert await waiter and places.held == 2 and places.waiting == 0
    unlimited = Places()
    assert all([await unlimited.acquire() for _ in range(100)]) and unlimited.held == 100


async def test_a_request_stepping_out_for_its_judges_hands_its_place_to_the_next_in_line():
    working = Working(1, wait_s=1.0)
    assert await working.acquire()
    with working.enter(admitted=True):
        waiter = asyncio.create_task(working.acquire())
        await asyncio.sleep(0.01)
        with Working.away():  # its judges are called: the waiter gets the place
            assert await waiter and working.count == 1
        assert working.count == 2  # back from its judges: counted again, past the limit
    working.release()
    assert working.count == 0


def test_a_judging_request_past_the_work_limit_waits_its_turn_then_gets_429(tmp_path: Path):
    """``max_inflight_work`` 1: while a /v1/fuse whose body never finishes holds the place, a
    second one waits (``work_wait_s``) and is answered 200 once the first closes; with nobody
    closing it is refused after its wait, not before, with a message naming the wait."""
    with live_gateway(tmp_path, server={"max_inflight_work": 1, "work_wait_s": 0.5,
                                        "work_lifo_after_s": 0.25}) as gw:
        working = gw.app.state.metrics.working
        assert (working.limit, working.wait_s, working.lifo_after_s) == (1, 0.5, 0.25)

        async def scenario() -> None:
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=10) as client:
                first = hold_open(gw.url, "/v1/fuse")
                await wait_until(lambda: working.count == 1)
                queued = asyncio.create_task(client.post("/v1/fuse", json=FUSE))
                await wait_until(lambda: working.waiting == 1)
                first.close()
                assert (await queued).status_code == 200
                await wait_until(lambda: working.count == 0)
                second = hold_open(gw.url, "/v1/fuse")
                await wait_until(lambda: working.count == 1)
                started = asyncio.get_running_loop().time()
                refused = await client.post("/v1/fuse", json=FUSE)
                waited = asyncio.get_running_loop().time() - started
                assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
                assert refused.json()["limit"] == "max_inflight_work"
                assert "none finished within 500 ms" in refused.json()["error"], refused.text
                assert waited >= 0.5
                second.close()
                await wait_until(lambda: working.count == 0 and working.waiting == 0)

        asyncio.run(scenario())


def test_judging_requests_past_the_work_limit_get_429_and_judge_waits_do_not_count(tmp_path: Path):
    """``server.max_inflight_work`` 2: a /v1/fuse whose body never finishes holds one place;
    a /v1/judge whose judges take 0.6 s holds none while it waits for them, so a second
    /v1/fuse is answered 200 meanwhile; with two bodies held, the next /v1/fuse and /v1/judge
    get 429 (limit max_inflight_work, Retry-After) at once, and 200 again once they close."""
    with live_gateway(tmp_path, server={"max_inflight_work": 2, "work_wait_s": 0.05}) as gw:
        for judge in S.JUDGES:
            gw.script.set(judge, action=S.stub_module.Reply(texts=S.sc_text("A", 80), delay_s=0.6))
        working = gw.app.state.metrics.working

        async def scenario() -> None:
            async with httpx.AsyncClient(base_url=gw.url, headers=HEADERS, timeout=10) as client:
                first = hold_open(gw.url, "/v1/fuse")
                await wait_until(lambda: working.count == 1)
                judged = asyncio.create_task(client.post("/v1/judge", json=PAIR))
                await wait_until(lambda: gw.judge_calls() >= 1)
                assert working.count == 1  # the judge request is waiting for its judges
                assert (await client.post("/v1/fuse", json=FUSE)).status_code == 200
                # the judge request ends first: back from its judges it takes a place for its own
                # work, so 'count == 2' could otherwise be it and the first hold, not the two holds
                assert (await judged).status_code == 200  # admitted before: never refused
                await wait_until(lambda: working.count == 1)
                second = hold_open(gw.url, "/v1/fuse")
                await wait_until(lambda: working.count == 2)
                for path, body in (("/v1/fuse", FUSE), ("/v1/judge", PAIR)):
                    refused = await client.post(path, json=body)
                    assert refused.status_code == 429, refused.text
                    assert refused.headers["Retry-After"] == "1"
                    assert refused.json()["limit"] == "max_inflight_work"
                    assert refused.json()["max_inflight"] == 2
                first.close()
                second.close()
                await wait_until(lambda: working.count == 0)
                assert (await client.post("/v1/fuse", json=FUSE)).status_code == 200

        asyncio.run(scenario())
