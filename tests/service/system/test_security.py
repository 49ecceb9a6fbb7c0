"""Security: tenant isolation on every endpoint that takes or returns tenant data (both storage
backends); tenant API keys stored hashed and compared in constant time; a planted provider key
that must appear nowhere (responses, /metrics, dashboard, logs, stdout/stderr, the SQLite file,
every Redis key, every PostgreSQL row); request size limits; CORS off by default."""

from __future__ import annotations

import hashlib
import inspect
import logging
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from jf_test_support import app_support as S

from judgefuse.service.settings import Settings, SettingsError, load_settings
from judgefuse.service.web import auth as auth_module
from judgefuse.service.web.auth import Authenticator, hash_key

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
A, B = S.auth("tenant-a"), S.auth("tenant-b")
SECRET_Q = "tenant-a-private-question-7f3c"


def _generated_stamp(html: str) -> str:
    return re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC", "<time>", html)


# ------------------------------------------------------------------------ tenant isolation
# every endpoint twice over, on each backend: ~50 s on PostgreSQL on a loaded machine, past the
# suite's 300 s timeout with two CPU-bound processes beside the run
@pytest.mark.timeout(1200)
async def test_tenant_b_sees_and_changes_nothing_of_tenant_a_on_every_endpoint(storage, stub, tmp_path):
    server, script = stub
    for j in S.JUDGES:
        script.set(j, "A", 95)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], min_labels_for_refit=10)
    async with S.running_app(settings, storage) as (_app, client):
        # tenant B's views before tenant A does anything
        b_before = {
            path: (await client.get(path, headers=B)).json()
            for path in ("/v1/calibration", "/v1/thresholds", "/v1/fusion/models", "/v1/fusion/refits")
        }
        b_dash_before = (await client.get("/console/calibration", headers=B)).text

        # tenant A: labelled traffic (with a private question), a tuned threshold, a refit, a batch
        a_ids = []
        for i in range(40):
            body = {**PAIR, "question": f"{SECRET_Q} {i}", "id": f"a-{i}", "label": "A" if i % 7 else "B"}
            r = await client.post("/v1/judge", json=body, headers=A)
            assert r.status_code == 200, r.text
            a_ids.append(r.json()["id"])
        batch = await client.post("/v1/judge/batch", headers=A, json={"items": [
            {**PAIR, "question": SECRET_Q, "id": "shared-id"}, {**PAIR, "question": SECRET_Q}]})
        assert batch.status_code == 200 and batch.json()["n_ok"] == 2
        a_batch_ids = [res["verdict"]["id"] for res in batch.json()["results"]]
        tuned = await client.post("/v1/thresholds/tune", headers=A,
                                  json={"target_precision": 0.8, "min_count": 30})
        assert tuned.status_code == 200 and tuned.json()["stored"] is True, tuned.text
        assert (await client.post("/v1/fusion/refit", json={}, headers=A)).status_code == 200
        a_views = {
            path: (await client.get(path, headers=A)).json()
            for path in ("/v1/calibration", "/v1/thresholds", "/v1/fusion/models")
        }
        a_verdict = (await client.get(f"/v1/verdicts/{a_ids[0]}", headers=A)).json()
        assert a_verdict["label"] == "B"
        assert a_views["/v1/calibration"]["keys"] and a_views["/v1/thresholds"]["current"] is not None

        # GET /v1/verdicts/{id}: 404, shaped exactly like an id that never existed
        for vid in [*a_ids[:3], *a_batch_ids, "shared-id", "a-1"]:
            got = await client.get(f"/v1/verdicts/{vid}", headers=B)
            never = await client.get(f"/v1/verdicts/{vid}-never-existed", headers=B)
            assert got.status_code == 404 == never.status_code
            assert got.json()["fields"] == never.json()["fields"]
            assert got.json()["error"] == never.json()["error"].replace("-never-existed", "")

        # POST /v1/feedback: 404 (not 403), and A's verdict and calibration are untouched
        for vid in a_ids[:3]:
            fb = await client.post("/v1/feedback", json={"verdict_id": vid, "label": "A"}, headers=B)
            assert fb.status_code == 404, fb.text
            never = await client.post("/v1/feedback", json={"verdict_id": vid + "x", "label": "A"}, headers=B)
            assert fb.json()["fields"] == never.json()["fields"]
        assert (await client.get(f"/v1/verdicts/{a_ids[0]}", headers=A)).json()["label"] == "B"

        # GET /v1/calibration, /v1/thresholds, /v1/fusion/models: B's views did not move
        for path, before in b_before.items():
            after = (await client.get(path, headers=B)).json()
            assert after == before, path
        assert b_before["/v1/calibration"]["keys"] == []
        assert b_before["/v1/thresholds"]["current"] is None and b_before["/v1/thresholds"]["history"] == []
        assert b_before["/v1/fusion/models"]["history"] == []
        assert b_before["/v1/fusion/refits"]["refits"] == []  # A's refit is in A's log only

        # POST /v1/thresholds/tune and /v1/fusion/refit as B read none of A's labels, change nothing of A's
        b_tune = (await client.post("/v1/thresholds/tune", headers=B,
                                    json={"target_precision": 0.8, "min_count": 1})).json()
        assert b_tune["n_labels"] == 0 and b_tune["stored"] is False
        b_refit = (await client.post("/v1/fusion/refit", json={}, headers=B)).json()
        assert b_refit["n_labels"] == 0 and b_refit["status"] != "promoted"
        for path, before in a_views.items():
            assert (await client.get(path, headers=A)).json() == before, path

        # POST /v1/judge and /batch: ids are per tenant; B's "shared-id" is B's own verdict
        mine = await client.post("/v1/judge/batch", headers=B, json={"items": [
            {**PAIR, "question": "tenant b question", "id": "shared-id"}]})
        assert mine.status_code == 200 and mine.json()["results"][0]["status"] == 200
        got = (await client.get("/v1/verdicts/shared-id", headers=B)).json()
        assert got["id"] == "shared-id"
        own_a = (await client.get("/v1/verdicts/shared-id", headers=A)).json()
        assert own_a["id"] == "shared-id" and own_a["created_at"] != got["created_at"]
        # a fresh verdict of B routes with B's (absent) threshold, not A's tuned one
        b_verdict = (await client.post("/v1/judge", json=PAIR, headers=B)).json()
        assert b_verdict["threshold"]["version"] is None and b_verdict["route"] == "human_review"

        # the dashboard: B's page names no A data (ids, question, threshold, tenant)
        b_dash = (await client.get("/console/calibration", headers=B)).text
        a_dash = (await client.get("/console/calibration", headers=A)).text
        assert "tenant-a" in a_dash and "tenant-a" not in b_dash
        for marker in (SECRET_Q, *a_ids[:5], *a_batch_ids, "key-for-tenant"):
            assert marker not in b_dash and marker not in b_dash_before
        assert "none tuned" in b_dash and "none tuned" not in a_dash
        # B's own calibration rows only: B has one unlabelled verdict, so no reliability diagram
        assert b_dash.count("<svg") == 0 < a_dash.count("<svg")

        # every response B got: none of A's verdict ids or question text
        everything_b = str([b_before, b_tune, b_refit, mine.json(), got, b_verdict])
        for marker in (SECRET_Q, *a_ids):
            assert marker not in everything_b


# ------------------------------------------------------------------------ API keys
def test_settings_store_only_digests_and_refuse_plain_keys():
    with pytest.raises(ValueError, match="SHA-256"):
        Settings(api_keys={"t": "sk-live-plain-key-not-a-digest"})
    with pytest.raises(SettingsError) as info:
        load_settings(api_keys={"t": "x" * 64})  # 64 chars, not hex
    assert "x" * 64 not in str(info.value)
    digest = hash_key("k1")
    assert Settings(api_keys={"t": digest.upper()}).web.api_keys == {"t": digest}
    authenticator = Authenticator({"t": digest}, open_mode=False)
    assert "k1" not in repr(vars(authenticator))


@pytest.mark.parametrize(("presented", "tenant"), [
    ("key-for-tenant-a-0001", "tenant-a"), ("key-for-tenant-b-0002", "tenant-b"), ("wrong", None),
])
def test_api_keys_are_compared_with_compare_digest_against_every_tenant(monkeypatch, presented, tenant):
    calls: list[tuple[bytes, bytes]] = []
    real = auth_module.hmac.compare_digest

    def counting(a: Any, b: Any) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", counting)
    digests = {t: hashlib.sha256(k.encode()).hexdigest() for t, k in S.TENANT_KEYS.items()}
    digests["tenant-c"] = hash_key("key-for-tenant-c")
    authenticator = Authenticator(digests, open_mode=False)
    if tenant is None:
        with pytest.raises(auth_module.Unauthorized):
            authenticator.tenant_for(f"Bearer {presented}", None)
    else:
        assert authenticator.tenant_for(f"Bearer {presented}", None) == tenant
    # no early exit: every tenant's digest is compared, whichever matched (timing tells nothing)
    assert len(calls) == 3
    assert all(len(a) == len(b) == 32 for a, b in calls)  # digests, not the raw key
    assert "hmac.compare_digest(" in inspect.getsource(auth_module.Authenticator.tenant_for)


# ------------------------------------------------------------------------ the planted provider key
async def _storage_bytes(storage: Any, sqlite_path: Path) -> bytes:
    from jf_test_support.pg_server import dump_text

    from judgefuse.service.storage.postgres import PostgresStorage
    from judgefuse.service.storage.redis import RedisStorage

    if isinstance(storage, PostgresStorage):
        return (await dump_text(storage)).encode()
    if isinstance(storage, RedisStorage):
        client = storage.client
        out = []
        async for key in client.scan_iter(count=1000):
            out.append(key if isinstance(key, bytes) else str(key).encode())
            dumped = await client.dump(key)
            out.append(dumped or b"")
            kind = await client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            if kind == "hash":
                out.append(repr(await client.hgetall(key)).encode())
            elif kind == "string":
                out.append(repr(await client.get(key)).encode())
            elif kind == "list":
                out.append(repr(await client.lrange(key, 0, -1)).encode())
            elif kind == "zset":
                out.append(repr(await client.zrange(key, 0, -1, withscores=True)).encode())
            elif kind == "set":
                out.append(repr(await client.smembers(key)).encode())
            elif kind == "stream":
                out.append(repr(await client.xrange(key)).encode())
        assert out, "redis holds no keys: the test wrote nothing?"
        return b"\n".join(out)
    files = [p for p in sqlite_path.parent.iterdir() if p.name.startswith(sqlite_path.name)]
    assert files
    return b"\n".join(p.read_bytes() for p in files)


async def test_planted_provider_key_appears_nowhere(storage, sqlite_path, stub, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    server, script = stub
    for j in S.JUDGES:
        script.set(j, "A", 95)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               min_labels_for_refit=10, log_level="debug")
    seen: list[str] = []
    async with S.running_app(settings, storage) as (_app, client):

        async def call(method: str, path: str, **kwargs: Any) -> httpx.Response:
            r = await client.request(method, path, **kwargs)
            seen.append(f"{r.status_code} {dict(r.headers)} {r.text}")
            return r

        for i in range(35):
            assert (await call("POST", "/v1/judge", json={**PAIR, "label": "AB"[i % 5 == 0]},
                               headers=A)).status_code == 200
        # one judge's provider rejects the key and echoes it back: a degraded verdict
        script.set("j3", action=S.stub_module.Status(401, f"Incorrect API key provided: {S.PLANTED}"))
        degraded = await call("POST", "/v1/judge", json={**PAIR, "label": "A"}, headers=A)
        assert degraded.status_code == 200 and degraded.json()["degraded"] is True
        await call("POST", "/v1/judge/batch", json={"items": [PAIR, {**PAIR, "label": "B"}]}, headers=A)
        # every provider rejects the key (echoing it): quorum lost, 503 naming each judge's reason
        server.require_key = "sk-another-key"
        lost = await call("POST", "/v1/judge", json=PAIR, headers=A)
        assert lost.status_code == 503 and lost.json()["failed_judges"]
        lost_batch = await call("POST", "/v1/judge/batch", json={"items": [PAIR]}, headers=A)
        assert lost_batch.status_code in (200, 503)
        server.require_key = S.PLANTED
        script.fixed.pop("j3")

        vid = degraded.json()["id"]
        await call("POST", "/v1/feedback", json={"verdict_id": vid, "label": "B"}, headers=A)
        await call("POST", "/v1/thresholds/tune", json={"target_precision": 0.8, "min_count": 30}, headers=A)
        await call("POST", "/v1/fusion/refit", json={}, headers=A)
        for path in (f"/v1/verdicts/{vid}", "/v1/calibration", "/v1/thresholds", "/v1/fusion/models",
                     "/v1/fusion/refits", "/console/calibration", "/metrics", "/healthz", "/readyz", "/openapi.json", "/docs"):
            r = await call("GET", path, headers=A)
            assert r.status_code == 200, (path, r.text)
        # error paths too
        await call("GET", "/v1/verdicts/nope", headers=A)
        await call("POST", "/v1/judge", json={"question": 1}, headers=A)
        await call("POST", "/v1/judge", json=PAIR, headers={"Authorization": f"Bearer {S.PLANTED}"})
        await call("POST", "/v1/judge", json={**PAIR, "answer_a": S.PLANTED[:-1]}, headers={})
        await call("GET", "/nowhere", headers=A)
        stored = await _storage_bytes(storage, sqlite_path)

    # the key really went to the provider on every call
    assert server.requests and all(
        r.headers.get("Authorization") == f"Bearer {S.PLANTED}" for r in server.requests)
    reasons = {f["judge"]: f["reason"] for f in degraded.json()["failed_judges"]}
    assert "401" in reasons["j3"]  # the failure is reported, only the key is gone
    captured = capfd.readouterr()
    texts = {"responses": "\n".join(seen), "logs": caplog.text, "stdout": captured.out,
             "stderr": captured.err}
    for where, text in texts.items():
        assert S.PLANTED not in text, where
        assert "PLANTED-KEY" not in text, where
        for key in S.TENANT_KEYS.values():
            assert key not in text, where
    assert S.PLANTED.encode() not in stored and b"PLANTED-KEY" not in stored
    assert S.PLANTED.encode("utf-16-le") not in stored
    for key in S.TENANT_KEYS.values():
        assert key.encode() not in stored


# ------------------------------------------------------------------------ size limits, CORS
@pytest.fixture
async def small_app(stub, tmp_path):
    server, script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                               max_body_bytes=2048, max_text_chars=100)
    async with S.running_app(settings) as (app, client):
        yield client


@pytest.mark.parametrize("path", ["/v1/judge", "/v1/judge/batch", "/v1/feedback", "/v1/thresholds/tune",
                                  "/v1/fusion/refit", "/v1/nowhere"])
async def test_every_post_body_over_the_limit_is_413_before_auth(small_app, path):
    big = b'{"x": "' + b"y" * 3000 + b'"}'
    for headers in (A, {}):
        r = await small_app.post(path, content=big, headers={**headers, "Content-Type": "application/json"})
        assert r.status_code == 413, (path, r.text)
        assert r.json()["fields"][0]["field"] == "body"

        async def chunks():
            for _ in range(4):
                yield b"y" * 1000

        r = await small_app.post(path, content=chunks(), headers={**headers, "Content-Type": "application/json"})
        # a chunked body is counted as it is read; an unknown path never reads it (404)
        assert r.status_code == (404 if path == "/v1/nowhere" else 413), (path, r.text)


async def test_text_over_max_text_chars_is_422_naming_the_field(small_app):
    r = await small_app.post("/v1/judge", json={**PAIR, "question": "q" * 101}, headers=A)
    assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body.question"


@pytest.mark.parametrize("path", ["/v1/judge", "/v1/calibration", "/healthz", "/console/calibration", "/metrics"])
async def test_cors_is_off_by_default(small_app, path):
    origin = {"Origin": "https://evil.example"}
    preflight = await small_app.options(path, headers={
        **origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type"})
    assert preflight.status_code in (404, 405)
    simple = await small_app.get(path, headers={**A, **origin})
    for r in (preflight, simple):
        assert not [h for h in r.headers if h.lower().startswith("access-control-")], (path, r.headers)


async def test_cors_when_configured_allows_only_listed_origins(stub, tmp_path):
    server, _ = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
                               cors_origins=["https://ok.example"])
    async with S.running_app(settings) as (_app, client):
        ok = await client.options("/v1/judge", headers={"Origin": "https://ok.example",
                                                        "Access-Control-Request-Method": "POST"})
        assert ok.headers.get("access-control-allow-origin") == "https://ok.example"
        bad = await client.get("/healthz", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in bad.headers
