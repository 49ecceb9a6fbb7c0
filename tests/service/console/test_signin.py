"""Signing in to the pages (issue 47, item 1): one sign-in page and server-side sessions for the
console, /metrics and /review, with roles (operator: a tenant key or an operator account;
viewer: the console read-only; annotator: /review only; the metrics token: every tenant), the
JSON 401 an API client still gets, and the CSRF guard on the console's posts."""

from __future__ import annotations

import re
from typing import Any

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel, put_threshold

from judgefuse.service.storage import SQLiteStorage
from judgefuse.service.web.sessions import COOKIE

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
SAME_ORIGIN = {**BROWSER, "Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}


def _settings(tmp_path, **overrides: Any):
    return S.make_settings(
        tmp_path, [external_panel(tmp_path)], review_session_secret="a-page-session-secret", **overrides
    )


async def _account(client: httpx.AsyncClient, name: str, role: str) -> str:
    r = await client.post("/v1/annotators", json={"name": name, "role": role}, headers=H)
    assert r.status_code == 201, r.text
    assert r.json()["role"] == role
    return r.json()["credential"]


async def _sign_in(client: httpx.AsyncClient, credential: str, next_url: str = "") -> httpx.Response:
    client.cookies.clear()
    return await client.post("/signin", data={"credential": credential, "next": next_url}, headers=SAME_ORIGIN)


def _csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html)[1]


async def test_a_browser_gets_the_sign_in_page_and_an_api_client_the_json_401(tmp_path):
    async with (
        SQLiteStorage(tmp_path / "s.sqlite3") as storage,
        S.running_app(_settings(tmp_path), storage) as (_, client),
    ):
        for path in ("/console", "/console/verdicts?panel=ext", "/metrics", "/review?panel=ext"):
            page = await client.get(path, headers=BROWSER)
            assert page.status_code == 401 and page.headers["content-type"].startswith("text/html"), path
            assert 'action="/signin"' in page.text and f'name="next" value="{path.replace("&", "&amp;")}"' in page.text
            assert "API key of your tenant" not in page.text  # annotators paste their own credential
            assert "default-src 'none'" in page.headers["content-security-policy"]
        # an API client: no text/html in Accept, or any key header (even with text/html)
        for path, headers in (
            ("/console", {}),
            ("/console", {"Accept": "application/json"}),
            ("/metrics", {"Accept": "text/plain;version=0.0.4"}),
            ("/console", {**BROWSER, "Authorization": "Bearer wrong"}),
            ("/console", {**BROWSER, "X-API-Key": "wrong"}),
        ):
            r = await client.get(path, headers=headers)
            assert r.status_code == 401 and r.headers["content-type"] == "application/json", (path, headers)
            assert r.json()["error"] and r.json()["fields"][0]["field"] == "header.authorization"
        # the key header still reads the pages as before
        assert (await client.get("/console", headers={**BROWSER, **H})).status_code == 200
        assert "judgefuse_" in (await client.get("/metrics", headers=H)).text
        # a wrong credential: the form again, with the reason; no cookie
        bad = await client.post("/signin", data={"credential": "nope", "next": "/console"}, headers=SAME_ORIGIN)
        assert bad.status_code == 401 and 'id="error"' in bad.text and COOKIE not in bad.cookies
        api = await client.post("/signin", data={"credential": "nope"})
        assert api.status_code == 401 and api.json()["fields"][0]["field"] == "form.credential"
        # a foreign next goes to the console
        for evil in ("//evil.example/x", "https://evil.example/", "/\\evil"):
            r = await _sign_in(client, S.TENANT_KEYS["tenant-a"], evil)
            assert r.status_code == 303 and r.headers["location"] == "/console", evil


async def test_roles_operator_viewer_annotator_and_the_metrics_token(tmp_path):
    async with (
        SQLiteStorage(tmp_path / "s.sqlite3") as storage,
        S.running_app(_settings(tmp_path), storage) as (_, client),
    ):
        for i in range(3):
            body = {**PAIR, "id": f"v{i}", "votes": SPLIT}
            assert (await client.post("/v1/fuse", json=body, headers=H)).status_code == 200
        await put_threshold(storage)
        operator = await _account(client, "olga", "operator")
        viewer = await _account(client, "vic", "viewer")
        annotator = await _account(client, "ann", "annotator")

        # the tenant key signs in as the tenant's operator, back where it came from
        r = await _sign_in(client, S.TENANT_KEYS["tenant-a"], "/console?panel=ext")
        assert r.status_code == 303 and r.headers["location"] == "/console?panel=ext"
        assert "Path=/" in r.headers["set-cookie"] and "HttpOnly" in r.headers["set-cookie"]
        page = await client.get("/console", headers=BROWSER)
        assert page.status_code == 200 and 'id="overview"' in page.text and 'action="/signout"' in page.text
        metrics = await client.get("/metrics", headers=BROWSER)
        assert metrics.status_code == 200 and 'tenant="tenant-a"' in metrics.text
        assert 'tenant="tenant-b"' not in metrics.text

        # an operator account: the console with its buttons, /review as itself
        r = await _sign_in(client, operator)
        assert r.headers["location"] == "/console"
        page = await client.get("/console", headers=BROWSER)
        assert "olga" in page.text and "(operator)" in page.text
        review = await client.get("/review", headers=BROWSER)
        assert review.status_code == 200 and 'id="question"' in review.text

        # a viewer: the console and /metrics read-only; every post refused; no /review
        r = await _sign_in(client, viewer, "/review")
        assert r.headers["location"] == "/console"
        page = await client.get("/console", headers=BROWSER)
        assert page.status_code == 200 and "(viewer)" in page.text
        assert "/console/monitor/clear" not in page.text
        assert (await client.get("/console/verdicts", params={"panel": "ext"}, headers=BROWSER)).status_code == 200
        assert (await client.get("/metrics", headers=BROWSER)).status_code == 200
        refused = await client.post(
            "/console/monitor/clear", data={"panel": "ext", "csrf": _csrf(page.text)}, headers=SAME_ORIGIN
        )
        assert refused.status_code == 403 and "read-only" in refused.text
        assert (await client.get("/review", headers=BROWSER)).status_code == 403
        # operator and viewer credentials are for the pages: the API says so
        for credential in (viewer, operator):
            api = await client.get(
                "/v1/calibration", params={"panel": "ext"}, headers={"Authorization": f"Bearer {credential}"}
            )
            assert api.status_code == 403 and "/signin" in api.json()["error"]

        # an annotator: /review only; the console and /metrics refuse it (a page for a browser)
        r = await _sign_in(client, annotator, "/console")
        assert r.headers["location"] == "/review"
        for path in ("/console", "/metrics", "/console/verdicts"):
            page = await client.get(path, headers=BROWSER)
            assert page.status_code == 403 and 'id="refused"' in page.text and "annotator" in page.text, path
            api = await client.get(path)
            assert api.status_code == 403 and api.headers["content-type"] == "application/json"
        assert (await client.get("/review", headers=BROWSER)).status_code == 200

        # the metrics token: every tenant's overview and series; it acts for no one tenant
        r = await _sign_in(client, S.METRICS_TOKEN)
        assert r.headers["location"] == "/console"
        page = await client.get("/console", headers=BROWSER)
        assert "every tenant" in page.text and 'data-tenant="tenant-b"' in page.text
        metrics = (await client.get("/metrics", headers=BROWSER)).text
        assert 'tenant="tenant-a"' in metrics and 'tenant="tenant-b"' in metrics
        refused = await client.post(
            "/console/monitor/clear", data={"panel": "ext", "csrf": _csrf(page.text)}, headers=SAME_ORIGIN
        )
        assert refused.status_code == 403

        # a revoked account's session ends at the next request
        await _sign_in(client, viewer)
        assert (await client.get("/console", headers=BROWSER)).status_code == 200
        assert (await client.post("/v1/annotators/vic/revoke", headers=H)).status_code == 200
        assert 'action="/signin"' in (await client.get("/console", headers=BROWSER)).text


async def test_the_console_posts_pass_the_csrf_guard_and_sign_out_ends_the_session(tmp_path):
    async with (
        SQLiteStorage(tmp_path / "s.sqlite3") as storage,
        S.running_app(_settings(tmp_path), storage) as (_, client),
    ):
        await put_threshold(storage)
        # no session: 401, nothing done
        bare = await client.post("/console/monitor/clear", data={"panel": "ext"}, headers=SAME_ORIGIN)
        assert bare.status_code == 401
        await _sign_in(client, await _account(client, "olga", "operator"))
        cookie = client.cookies.get(COOKIE)
        page = (await client.get("/console", headers=BROWSER)).text
        csrf = _csrf(page)
        assert 'action="/console/monitor/clear"' not in page  # no alarm: no button
        form = {"panel": "ext", "csrf": csrf}
        for bad in (
            {"Origin": "null"},
            {"Origin": "http://127.0.0.1:1"},
            {"Sec-Fetch-Site": "same-site"},
            {"Sec-Fetch-Site": "cross-site"},
        ):
            r = await client.post("/console/monitor/clear", data=form, headers={**BROWSER, **bad})
            assert r.status_code == 403, bad
        for token in ({}, {"csrf": ""}, {"csrf": "0" * 32}):
            r = await client.post("/console/monitor/clear", data={"panel": "ext", **token}, headers=SAME_ORIGIN)
            assert r.status_code == 403 and "form.csrf" in r.text, token
        ok = await client.post("/console/monitor/clear", data=form, headers=SAME_ORIGIN)
        assert ok.status_code == 303 and ok.headers["location"].startswith("/console?panel=ext")
        # sign-out: the stored session is deleted, so a copy of the cookie opens nothing
        out = await client.post("/signout", data={"csrf": csrf}, headers=SAME_ORIGIN)
        assert out.status_code == 303 and out.headers["location"] == "/signin"
        client.cookies.set(COOKIE, cookie)
        assert (await client.get("/console", headers=BROWSER)).status_code == 401
        assert (await client.post("/console/monitor/clear", data=form, headers=SAME_ORIGIN)).status_code == 401


async def test_open_mode_needs_no_sign_in_and_its_posts_need_the_form_token(tmp_path):
    settings = _settings(tmp_path, api_keys={}, metrics_token=None)
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (app, client):
        page = await client.get("/console", headers=BROWSER)
        assert page.status_code == 200 and 'id="overview"' in page.text
        assert COOKIE in page.cookies  # the first visit opens a session for the form token
        assert (
            await client.post("/console/monitor/clear", data={"panel": "ext"}, headers=SAME_ORIGIN)
        ).status_code == 403
        await storage.put_threshold("default", "ext", (await _threshold()))
        signer = app.state.review_sessions
        csrf = signer.form_token(signer.read(client.cookies.get(COOKIE).strip('"')))
        ok = await client.post("/console/monitor/clear", data={"panel": "ext", "csrf": csrf}, headers=SAME_ORIGIN)
        assert ok.status_code == 303


async def _threshold():
    from judgefuse.service.storage import ThresholdRecord

    return ThresholdRecord(
        panel="ext",
        threshold=0.9,
        created_at=1.0,
        method="majority",
        target_precision=0.9,
        delta=0.1,
        coverage=0.5,
        n_labels=100,
    )
