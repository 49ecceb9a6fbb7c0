"""Validation at the boundary: a request the gateway cannot judge and store is refused before any
judge is called (counted at the stub), and a batch answers per item.

Found by an adversarial run: a ``metadata`` 256-990 levels deep passed validation and failed
only when the verdict was serialised for storage (a 500, after 3 judge calls); in a batch one
such item made the whole batch a 500 although the good items had been stored.
"""

from __future__ import annotations

from typing import Any

import pytest
from jf_test_support import app_support as S

from judgefuse.service.judging.request_checks import json_depth, visibly_empty

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
A = S.auth("tenant-a")


def nested(depth: int, *, kind: str = "dict") -> Any:
    """A JSON value ``depth`` levels deep (``depth`` containers)."""
    value: Any = {} if kind == "dict" else []
    for _ in range(depth - 1):
        value = {"k": value} if kind == "dict" else [value]
    return value


def test_json_depth_counts_containers_without_recursion():
    assert json_depth(1) == 0
    assert json_depth({}) == 1
    assert json_depth({"a": [1, {"b": []}]}) == 4
    assert json_depth(nested(50_000)) == 50_000  # far past Python's recursion limit
    assert json_depth(nested(50_000, kind="list"), stop_after=32) == 33


@pytest.mark.parametrize(("text", "empty"), [
    ("", True), (" \t\n", True), ("\u200b", True), ("\u200b\u200c\u200d\u2060\ufeff", True),
    ("\u202e\u00a0\u3000", True), ("\u3164\u2800", True), ("\x00", True),
    ("a", False), ("\u200ba", False), ("0", False), ("\u0301", False),
])
def test_visibly_empty(text, empty):
    assert visibly_empty(text) is empty


@pytest.fixture
async def app_client(storage, stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (app, client):
        yield server, client


@pytest.mark.parametrize("depth", [33, 256, 990])
async def test_deep_metadata_is_422_before_any_judge_call(app_client, depth):
    server, client = app_client
    # written by hand: json.dumps itself recurses too deep for 990 levels
    raw = (b'{"question": "q", "answer_a": "a", "answer_b": "b", "metadata": '
           + b'{"m": ' * (depth - 1) + b"{}" + b"}" * (depth - 1) + b"}")
    r = await client.post("/v1/judge", content=raw, headers={**A, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    field = r.json()["fields"][0]
    # near Python's recursion limit json.loads itself gives up first: the body is named instead
    assert field in ({"field": "body.metadata", "problem": "nested too deeply: more than 32 levels"},
                     {"field": "body", "problem": "could not be parsed as JSON (nested too deeply?)"})
    if depth < 900:
        assert field["field"] == "body.metadata"
    assert server.requests == []


async def test_metadata_at_the_depth_limit_is_judged_and_stored(app_client):
    server, client = app_client
    metadata = {"m": nested(31)}
    assert json_depth(metadata) == 32
    r = await client.post("/v1/judge", json={**PAIR, "id": "deep-ok", "metadata": metadata}, headers=A)
    assert r.status_code == 200, r.text
    assert len(server.requests) == 3
    again = await client.get("/v1/verdicts/deep-ok", headers=A)
    assert again.status_code == 200


@pytest.mark.parametrize("metadata", [
    {"wide": "x" * (64 * 1024)},
    {f"k{i}": i for i in range(10_000)},
    {"list": list(range(20_000))},
])
async def test_large_metadata_is_422_naming_the_field_before_any_judge_call(app_client, metadata):
    server, client = app_client
    r = await client.post("/v1/judge", json={**PAIR, "metadata": metadata}, headers=A)
    assert r.status_code == 422, r.text
    field = r.json()["fields"][0]
    assert field["field"] == "body.metadata" and field["problem"].startswith("too large"), field
    assert server.requests == []


async def test_a_batch_answers_per_item_and_stores_the_good_ones(app_client):
    server, client = app_client
    items = [
        {**PAIR, "id": "good-1"},
        {**PAIR, "id": "deep", "metadata": {"m": nested(300)}},
        {**PAIR, "id": "good-2"},
        {"question": "no answers"},
        {**PAIR, "question": "", "answer_a": "\u200b", "answer_b": "\ufeff"},
        {**PAIR, "panel": "nope"},
        {**PAIR, "id": "good-1"},
        7,
    ]
    r = await client.post("/v1/judge/batch", json={"items": items}, headers=A)
    assert r.status_code == 200, r.text
    body = r.json()
    statuses = [res["status"] for res in body["results"]]
    assert statuses == [200, 422, 200, 422, 422, 422, 422, 422], body
    assert (body["n_ok"], body["n_failed"]) == (2, 6)
    fields = [[f["field"] for f in res["error"]["fields"]] for res in body["results"][1:] if res["error"]]
    assert fields == [
        ["body.items[1].metadata"],
        ["body.items[3].answer_a", "body.items[3].answer_b"],
        ["body.items[4].question"],
        ["body.items[5].panel"],
        ["body.items[6].id"],
        ["body.items[7]"],
    ]
    assert len(server.requests) == 2 * 3  # the two good items only
    for vid in ("good-1", "good-2"):
        assert (await client.get(f"/v1/verdicts/{vid}", headers=A)).status_code == 200
    assert (await client.get("/v1/verdicts/deep", headers=A)).status_code == 404


@pytest.mark.parametrize("body", [{"items": []}, {"items": "x"}, {"itemz": [PAIR]}, [PAIR], {}])
async def test_a_structurally_broken_batch_body_is_a_batch_level_422(app_client, body):
    server, client = app_client
    r = await client.post("/v1/judge/batch", json=body, headers=A)
    assert r.status_code == 422, r.text
    assert r.json()["fields"][0]["field"].startswith("body")
    assert server.requests == []


async def test_invalid_utf8_is_400_saying_so(app_client):
    _server, client = app_client
    raw = b'{"question": "caf\xe9", "answer_a": "a", "answer_b": "b"}'
    for path in ("/v1/judge", "/v1/judge/batch", "/v1/feedback"):
        r = await client.post(path, content=raw, headers={**A, "Content-Type": "application/json"})
        assert r.status_code == 400, r.text
        assert "not valid UTF-8" in r.json()["error"]
        assert r.json()["fields"] == [{"field": "body", "problem": "not valid UTF-8"}]


async def test_zero_width_question_and_answers_count_as_empty(app_client):
    server, client = app_client
    r = await client.post("/v1/judge", headers=A, json={
        "question": "\u200b", "answer_a": "\u200b\u200d", "answer_b": "\u2060\ufeff "})
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body.question", r.text
    ok = await client.post("/v1/judge", headers=A, json={**PAIR, "answer_b": "\u200b"})
    assert ok.status_code == 200, ok.text  # one empty answer is a fair question to judge
    assert len(server.requests) == 3
