"""Every way a call can fail raises a JudgefuseError subclass, sync and async (issue 47, item 4):
a request the client refuses before sending, a redirect, a body that is not JSON, JSON of the
wrong shape, an answer that trickles in past the deadline (headers or body), an answer over
the size cap, no gateway at all. The answers come from a tiny server on loopback whose first
path segment picks the misbehaviour."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from jf_test_support.ports import free_port

from judgefuse.client import (
    AsyncClient,
    BadResponse,
    CircuitBreaker,
    Client,
    ConnectionFailed,
    DeadlineExceeded,
    GatewayDown,
    InvalidRequest,
    JudgefuseError,
    Record,
    ResponseTooLarge,
    RetryPolicy,
)
from judgefuse.client.models import CalibrationOut, TuneOut, typed

QUICK = RetryPolicy(deadline_s=1.5, backoff_s=0.05, max_backoff_s=0.1)
CAP = 1024 * 1024
PAIR = {"question": "q", "answer_a": "a", "answer_b": "b"}


class Misbehaving(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        with contextlib.suppress(OSError):  # the client hangs up on the slow and the big ones
            if mode == "redirect":
                self._send(302, b"", [("Location", "https://elsewhere.example/login")])
            elif mode == "html":
                self._send(200, b"<html><body>Sign in</body></html>", [("Content-Type", "text/html")])
            elif mode == "shape":
                self._send(200, b'{"hello": "world"}', [("Content-Type", "application/json")])
            elif mode == "stall":  # headers never come
                time.sleep(20)
            elif mode == "trickle":  # headers at once, then a byte every 0.1 s for 20 s
                self._head(200, [("Content-Length", "200"), ("Content-Type", "application/json")])
                for _ in range(200):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.1)
            elif mode == "big-declared":
                self._head(200, [("Content-Length", str(200 * CAP)), ("Content-Type", "application/json")])
            elif mode == "big":  # no length: read until the connection closes
                self._head(200, [("Content-Type", "application/json"), ("Connection", "close")])
                for _ in range(200):
                    self.wfile.write(b"[" * 65536)

    do_GET = do_POST = _answer

    def _head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()

    def _send(self, status: int, body: bytes, headers: list[tuple[str, str]]) -> None:
        self._head(status, [*headers, ("Content-Length", str(len(body)))])
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Misbehaving)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


# (base path, the call, the error expected, what its message names)
Case = tuple[str, Callable[[Any], Any], type[JudgefuseError], str]
CASES: dict[str, Case] = {
    "label C": ("ok", lambda c: c.feedback("some-id", "C"), InvalidRequest, "body.label"),
    "confidence 1.5": ("ok", lambda c: c.fuse(**PAIR, votes=[{"judge": "e1", "choice": "A", "confidence": 1.5}]),
                       InvalidRequest, "body.votes.0.confidence"),
    "bad verdict id": ("ok", lambda c: c.verdict("a/b"), InvalidRequest, "verdict_id"),
    "redirect": ("redirect", lambda c: c.verdict("v1"), BadResponse, "302"),
    "not JSON": ("html", lambda c: c.judge(**PAIR), BadResponse, "not JSON"),
    "wrong shape": ("shape", lambda c: c.verdict("v1"), BadResponse, "not the expected answer"),
    "refit log of the wrong shape": ("shape", lambda c: c.refits(), BadResponse, "not the expected answer"),
    "refit log limit 0": ("ok", lambda c: c.refits(limit=0), InvalidRequest, "query.limit"),
    "headers stall": ("stall", lambda c: c.verdict("v1"), DeadlineExceeded, "deadline_s=1.5"),
    "body trickles": ("trickle", lambda c: c.verdict("v1"), DeadlineExceeded, "deadline_s=1.5"),
    "declared too big": ("big-declared", lambda c: c.verdict("v1"), ResponseTooLarge, "max_response_bytes"),
    "too big": ("big", lambda c: c.verdict("v1"), ResponseTooLarge, "max_response_bytes"),
}


def check(exc: JudgefuseError, expected: type[JudgefuseError], named: str, elapsed: float) -> None:
    assert isinstance(exc, expected) and isinstance(exc, JudgefuseError)
    assert named in str(exc) or any(named == f.field for f in getattr(exc, "fields", []))
    # a 1.5 s deadline: nothing waits out the slow answers (20 s), nothing is retried at length
    assert elapsed < 10.0


@pytest.mark.parametrize("case", list(CASES))
def test_sync_failure_is_typed(server: str, case: str) -> None:
    base, do, expected, named = CASES[case]
    started = time.monotonic()
    with Client(f"{server}/{base}", retry=QUICK, max_response_bytes=CAP) as client, \
            pytest.raises(JudgefuseError) as raised:
        do(client)
    check(raised.value, expected, named, time.monotonic() - started)


@pytest.mark.parametrize("case", list(CASES))
async def test_async_failure_is_typed(server: str, case: str) -> None:
    base, do, expected, named = CASES[case]
    started = time.monotonic()
    async with AsyncClient(f"{server}/{base}", retry=QUICK, max_response_bytes=CAP) as client:
        with pytest.raises(JudgefuseError) as raised:
            await do(client)
    check(raised.value, expected, named, time.monotonic() - started)


def test_no_gateway_is_connection_failed_sync_and_async() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url, retry=QUICK) as client, pytest.raises(ConnectionFailed):
        client.judge(**PAIR)

    async def main() -> None:
        async with AsyncClient(url, retry=QUICK) as client:
            await client.judge(**PAIR)

    with pytest.raises(ConnectionFailed):
        asyncio.run(main())


def test_a_refused_request_names_the_field_and_keeps_pydantic_as_the_cause() -> None:
    with Client("http://127.0.0.1:9") as client, pytest.raises(InvalidRequest) as refused:
        client.feedback("some-id", "C")
    assert refused.value.status == 0 and refused.value.attempts == 0
    assert [f.field for f in refused.value.fields] == ["body.label"]
    assert type(refused.value.__cause__).__name__ == "ValidationError"


def test_mapping_blocks_read_as_attributes_and_as_keys() -> None:
    key = {"key": "method:majority:fused", "storage_key": None, "panel": "main", "kind": "method",
           "name": "majority", "mode": None, "sample": "all", "window": None, "abstained": None,
           "population": None, "all_time": {"n": 3, "accuracy": 0.75, "ece": {"value": 0.1}}}
    report = typed(CalibrationOut)({"panel": "main", "window_hours": None, "eps": 0.01, "n_bins": 10,
                                    "keys": [key]})
    assert report.keys[0].all_time.accuracy == report.keys[0].all_time["accuracy"] == 0.75
    assert report.keys[0].all_time.ece.value == 0.1 and isinstance(report.keys[0].all_time, Record)
    assert report.keys[0].all_time == {"n": 3, "accuracy": 0.75, "ece": {"value": 0.1}}
    tuned = typed(TuneOut)({"panel": "main", "method": "majority", "model_version": None, "n_labels": 1,
                            "n_unsolicited": 0, "data": "x", "population": {"review": 1}, "stored": False,
                            "threshold": None, "version": None, "reason": "r", "report": {"rows": [{"t": 0.5}]}})
    assert tuned.report is not None and tuned.report.rows[0].t == 0.5
    with pytest.raises(AttributeError, match="keys: rows"):
        _ = tuned.report.nothing
    assert json.loads(tuned.model_dump_json())["report"] == {"rows": [{"t": 0.5}]}  # dumps as plain JSON


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_gateway_that_never_answers_opens_the_breaker_by_outage_time(server: str, flavour: str) -> None:
    """No connection is refused here: every send times out (0.2 s). The count in a row is set
    out of reach (1,000), so it is ``outage_s`` (1 s without an answer) that stops the run:
    one GatewayDown in seconds, not 50 pairs x a 30 s retry deadline each."""
    patient = RetryPolicy(deadline_s=30, backoff_s=0.05, max_backoff_s=0.1)
    breaker = CircuitBreaker(failures=1000, outage_s=1.0)
    items = [{**PAIR, "question": f"q{i}"} for i in range(50)]
    started = time.monotonic()
    if flavour == "sync":
        with Client(f"{server}/stall", retry=patient, timeout=0.2, breaker=breaker) as client, \
                pytest.raises(GatewayDown) as stopped:
            list(client.judge_pairs(items, concurrency=4, progress=False))
    else:
        async def main() -> None:
            async with AsyncClient(f"{server}/stall", retry=patient, timeout=0.2, breaker=breaker) as client:
                _ = [r async for r in client.judge_pairs(items, concurrency=4, progress=False)]

        with pytest.raises(GatewayDown) as stopped:
            asyncio.run(main())
    assert stopped.value.finished == 0 and "ReadTimeout" in str(stopped.value)
    assert time.monotonic() - started < 15.0

