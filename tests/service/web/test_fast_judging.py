"""``POST /v1/judge`` and ``/v1/fuse`` below FastAPI (:mod:`judgefuse.service.web.fast_judging`):
the same answers as the FastAPI routes, request for request.

Two apps on one judge stub, one as built and one with the fast path taken out, get the same
requests: valid ones, every kind of refusal (body, key, content type, size), and errors the
service raises while judging. Each pair of answers must match (status, the headers a client
reads, the error body byte for byte; a verdict's fields apart from its id and timings). The
fast path must have served the valid requests itself (FastAPI's router never saw them) and
handed every refusal to FastAPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from fastapi import Request
from jf_test_support import app_support as S
from jf_test_support.panel_support import UNANIMOUS, external_panel

from judgefuse.service.app import create_app
from judgefuse.service.judging.deps import get_judging
from judgefuse.service.kernel.accounts import CREDENTIAL_PREFIX
from judgefuse.service.web.fast_judging import FastJudging

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
READ_HEADERS = ("content-type", "content-length", "www-authenticate", "retry-after", "connection")
VOLATILE = {"id", "timings", "created_at", "latency_s", "expires_at"}


@dataclass
class Seen:
    """Per request: whether FastAPI's routing reached the route; the route the request
    timing labels it with."""

    routed: list[bool] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)


@contextlib.asynccontextmanager
async def served(settings: Any, *, fast: bool) -> AsyncIterator[tuple[httpx.AsyncClient, Seen]]:
    """An app (with or without the fast path) recording, per request, whether FastAPI's routing
    reached the route (the judging routes' dependency is overridden by a recorder: FastAPI
    honours that, the fast path never reads it)."""
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    if not fast:
        app.user_middleware = [m for m in app.user_middleware if m.cls is not FastJudging]
    seen = Seen()
    routed = seen.routed

    async def judging_via_fastapi(request: Request) -> Any:
        routed[-1] = True  # FastAPI solved the route's dependencies: its routing reached it
        return await get_judging(request)

    app.dependency_overrides[get_judging] = judging_via_fastapi

    async def spy(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            routed.append(False)
        await app(scope, receive, send)
        seen.labels.append(getattr(scope.get("route"), "path", None))  # the request timing's label

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=spy)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            yield client, seen


@pytest.fixture
async def pair_of_apps(stub, tmp_path):
    server, script = stub
    panels = [S.panel_yaml(tmp_path, server.url), external_panel(tmp_path)]
    apps = []
    async with contextlib.AsyncExitStack() as stack:
        for fast in (True, False):
            settings = S.make_settings(tmp_path, panels, max_body_bytes=4096, max_text_chars=200,
                                       body_timeout_s=0.3,
                                       storage_url=f"sqlite:///{tmp_path / f'db-{fast}.sqlite3'}")
            apps.append(await stack.enter_async_context(served(settings, fast=fast)))
        yield apps, script


def comparable(response: httpx.Response) -> tuple[int, dict[str, str], Any]:
    headers = {name: response.headers[name] for name in READ_HEADERS if name in response.headers}
    try:
        body = response.json()
    except ValueError:
        return response.status_code, headers, response.text
    if response.status_code == 200:
        headers.pop("content-length")  # ids and timings differ in length
        body = {k: v for k, v in body.items() if k not in VOLATILE}
        body["votes"] = [{k: v for k, v in vote.items() if k not in VOLATILE} for vote in body.get("votes", [])]
    return response.status_code, headers, body


async def chunks(data: bytes, pause_s: float = 0.0) -> AsyncIterator[bytes]:
    """A body in parts of 1 KiB, ``pause_s`` apart (sent chunked unless a Content-Length is
    given): the size limit counts it as it comes, the body timeout runs while it comes."""
    for i in range(0, len(data), 1024):
        if i:
            await asyncio.sleep(pause_s)
        yield data[i:i + 1024]


JSON = {"Content-Type": "application/json"}
CASES: dict[str, tuple[str, Any, Any]] = {
    # name: (path, headers (a dict, or a list of pairs to repeat one), body as JSON (a dict or
    # list) or raw bytes)
    "judged": ("/v1/judge", S.auth("tenant-a"), PAIR),
    "judged by X-API-Key": ("/v1/judge", {"X-API-Key": S.TENANT_KEYS["tenant-b"]}, PAIR),
    "fused": ("/v1/fuse", S.auth("tenant-a"), {**PAIR, "panel": "ext", "votes": UNANIMOUS}),
    "with an id": ("/v1/judge", S.auth("tenant-a"), {**PAIR, "id": "fixed-1"}),
    "replayed id": ("/v1/judge", S.auth("tenant-a"), {**PAIR, "id": "fixed-1"}),
    "form content type": ("/v1/judge", {**S.auth("tenant-a"), "Content-Type": "application/x-www-form-urlencoded"},
                          json.dumps(PAIR).encode()),
    "+json content type": ("/v1/judge", {**S.auth("tenant-a"), "Content-Type": "application/vnd.x+json"},
                           json.dumps(PAIR).encode()),
    "text/plain content type": ("/v1/judge", {**S.auth("tenant-a"), "Content-Type": "text/plain"},
                                json.dumps(PAIR).encode()),
    "no content type": ("/v1/judge", S.auth("tenant-a"), json.dumps(PAIR).encode()),
    "not JSON": ("/v1/judge", {**S.auth("tenant-a"), **JSON}, b"{not json"),
    "not UTF-8": ("/v1/judge", {**S.auth("tenant-a"), **JSON}, b'{"question": "\xff"}'),
    "empty body": ("/v1/judge", {**S.auth("tenant-a"), **JSON}, b""),
    "a list": ("/v1/judge", S.auth("tenant-a"), [PAIR]),
    "a field missing": ("/v1/judge", S.auth("tenant-a"), {"question": "q", "answer_a": "a"}),
    "a text too long": ("/v1/judge", S.auth("tenant-a"), {**PAIR, "question": "x" * 300}),
    "an unknown panel": ("/v1/judge", S.auth("tenant-a"), {**PAIR, "panel": "nope"}),
    "votes for a judge not on the panel": ("/v1/fuse", S.auth("tenant-a"),
                                           {**PAIR, "panel": "ext", "votes": [{"judge": "zz", "choice": "A",
                                                                               "confidence": 0.9}]}),
    "invalid and no key": ("/v1/judge", {}, {"question": 1}),
    "no key": ("/v1/judge", {}, PAIR),
    "an unknown key": ("/v1/judge", {"Authorization": "Bearer nope"}, PAIR),
    "the metrics token": ("/v1/fuse", S.admin(), PAIR),
    "an annotator credential": ("/v1/judge", {"Authorization": f"Bearer {CREDENTIAL_PREFIX}abc"}, PAIR),
    "two keys, the first a tenant's": ("/v1/judge", [("Authorization", f"Bearer {S.TENANT_KEYS['tenant-a']}"),
                                                     ("Authorization", "Bearer nope")], PAIR),
    "two keys, the first unknown": ("/v1/judge", [("Authorization", "Bearer nope"),
                                                  ("Authorization", f"Bearer {S.TENANT_KEYS['tenant-a']}")], PAIR),
    "a key in the query string": ("/v1/judge?api_key=abc", S.auth("tenant-a"), PAIR),
    "another query string": ("/v1/judge?trace=1", S.auth("tenant-a"), PAIR),
    "over the size limit": ("/v1/judge", {**S.auth("tenant-a"), **JSON}, json.dumps({**PAIR, "x": "y" * 5000}).encode()),
}


async def send(client: httpx.AsyncClient, case: str, *, chunked: bool = False) -> httpx.Response:
    path, headers, body = CASES[case]
    if isinstance(body, bytes):
        content: Any = chunks(body) if chunked else body
        return await client.post(path, content=content, headers=headers)
    return await client.post(path, json=body, headers=headers)


async def test_every_answer_is_the_routes_own_and_only_valid_requests_skip_fastapi(pair_of_apps):
    ((fast, fast_seen), (routed_client, slow_seen)), _ = pair_of_apps
    for case in CASES:
        answers = [comparable(await send(client, case)) for client in (fast, routed_client)]
        assert answers[0] == answers[1], case
        if answers[0][0] == 200:  # served here, unless a query string sent it on (to be read)
            assert (fast_seen.routed[-1], slow_seen.routed[-1]) == ("?" in CASES[case][0], True), case
        elif case == "a field missing":  # FastAPI solved the dependencies, then refused the body
            assert (fast_seen.routed[-1], slow_seen.routed[-1]) == (True, True), case
        if case != "form content type":  # that middleware hands on a copy of the scope
            assert fast_seen.labels[-1] == slow_seen.labels[-1], case
    assert fast_seen.labels[0] == "/v1/judge"
    statuses = {case: comparable(await send(fast, case))[0] for case in ("judged", "no key", "not JSON")}
    assert statuses == {"judged": 200, "no key": 401, "not JSON": 422}


async def test_a_chunked_body_over_the_limit_is_refused_alike(pair_of_apps):
    ((fast, _), (routed_client, _)), _ = pair_of_apps
    answers = [comparable(await send(client, "over the size limit", chunked=True))
               for client in (fast, routed_client)]
    assert answers[0] == answers[1]
    assert answers[0][0] == 413


async def test_a_body_that_comes_too_slowly_is_refused_alike(pair_of_apps):
    """A body with its length given but sent slower than ``body_timeout_s`` (0.3 s here): the
    fast path reads it, so its 408 must be the route's."""
    ((fast, fast_seen), (routed_client, _)), _ = pair_of_apps
    data = json.dumps({**PAIR, "question": "q" * 150, "answer_a": "a" * 150, "metadata": {"pad": "p" * 2000}}).encode()
    headers = {**S.auth("tenant-a"), **JSON, "Content-Length": str(len(data))}
    answers = [comparable(await client.post("/v1/judge", content=chunks(data, pause_s=0.2), headers=headers))
               for client in (fast, routed_client)]
    assert answers[0] == answers[1]
    assert answers[0][0] == 408 and fast_seen.routed[-1] is False
    quick = comparable(await fast.post("/v1/judge", content=chunks(data), headers=headers))
    assert quick[0] == 200  # the same body in time: served


async def test_errors_raised_while_judging_get_the_apps_own_handlers(pair_of_apps):
    """No judge answers: the panel lost its quorum (503, naming each judge's failure), raised
    inside the service after the fast path took the request."""
    ((fast, fast_seen), (routed_client, _)), script = pair_of_apps
    for judge in S.JUDGES:
        script.set(judge, action=S.stub_module.Status(500, "upstream exploded"))
    answers = [comparable(await send(client, "judged")) for client in (fast, routed_client)]
    assert answers[0] == answers[1]
    assert answers[0][0] == 503 and fast_seen.routed[-1] is False
    assert {f["judge"] for f in answers[0][2]["failed_judges"]} == set(S.JUDGES)
