"""The annotator page /review: login exchanges the API key for a signed cookie (the key never
in the page or a URL), everything escaped, cross-site posts refused; and in headless Chromium
(driven over the DevTools protocol) an annotator labels three items with the keyboard and skips
one, and the labels are stored."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support import browser
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.app import create_app
from judgefuse.service.review.session import COOKIE

BROWSER = {"Accept": "text/html"}
"""A browser navigating: the pages answer it with HTML (sign-in, refusals), API clients with JSON."""

CHROMIUM = "/usr/bin/chromium"
KEY = S.TENANT_KEYS["tenant-a"]
XSS = '<script>alert("q")</script><img src=x onerror=alert(1)>'


async def _fill(client: httpx.AsyncClient, n: int, **extra: Any) -> None:
    for i in range(n):
        body = {**PAIR, "id": f"p{i}", "question": f"question number {i}", "votes": SPLIT, **extra}
        r = await client.post("/v1/fuse", json=body, headers=H)
        assert r.status_code == 200, r.text


async def test_login_cookie_escaping_and_cross_site_posts(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        await _fill(client, 1, question=XSS, answer_a="<b>bold</b> & co", answer_b='"quoted"')
        page = await client.get("/review", headers=BROWSER)
        assert page.status_code == 401 and 'action="/signin"' in page.text  # the sign-in page
        for api in ({}, H):  # an API client (no text/html, or a key header): the JSON 401 as everywhere
            answer = await client.get("/review", headers={"Accept": "text/html", **api} if api else {})
            assert answer.status_code == 401 and answer.headers["content-type"].startswith("application/json")
            assert answer.json()["fields"] == [{"field": "cookie", "problem": "no live session"}]
        assert "API key of your tenant" not in page.text  # annotators paste their own credential
        bad = await client.post("/review/login", data={"api_key": "wrong"}, headers={"Accept": "text/html"})
        assert bad.status_code == 401 and "unknown credential or API key" in bad.text and "<form" in bad.text
        assert COOKIE not in bad.cookies
        api = await client.post("/review/login", data={"api_key": "wrong"})  # not a browser: JSON
        assert api.status_code == 401 and api.json()["fields"][0]["field"] == "form.credential"
        forged = await client.get("/review", headers={"Accept": "text/html", "Cookie": f"{COOKIE}=eyJ0IjoidGVuYW50LWEifQ.00"})
        assert 'action="/signin"' in forged.text
        unauth = await client.post("/review/label", data={"verdict_id": "p0", "label": "A"})
        assert unauth.status_code == 401

        login = await client.post("/review/login", data={"api_key": KEY, "annotator": "ann<1>"})
        assert login.status_code == 303 and login.headers["location"] == "/review"
        cookie = login.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie.replace("Strict", "strict")
        assert KEY not in cookie
        page = await client.get("/review", headers=BROWSER)
        html = page.text
        assert page.status_code == 200
        assert XSS not in html and "&lt;script&gt;alert(" in html
        assert "<b>bold</b>" not in html and "&lt;b&gt;bold&lt;/b&gt; &amp; co" in html
        assert "ann&lt;1&gt;" in html and "ann<1>" not in html
        assert KEY not in html and KEY not in str(page.url)
        assert "the judges chose" not in html  # no anchoring unless the panel opts in
        assert "default-src 'none'" in page.headers["content-security-policy"]
        csrf = re.search(r'name="csrf" value="([^"]+)"', html)[1]  # the session's form token
        # a post from another site is refused even with the cookie
        evil = await client.post("/review/label", data={"verdict_id": "p0", "label": "A", "csrf": csrf},
                                 headers={"Origin": "https://evil.example"})
        assert evil.status_code == 403
        assert (await storage.get_verdict("tenant-a", "p0")).label is None
        bad_label = await client.post("/review/label", data={"verdict_id": "p0", "label": "C", "csrf": csrf})
        assert bad_label.status_code == 422 and bad_label.json()["fields"][0]["field"] == "form.label"
        ok = await client.post("/review/label", data={"verdict_id": "p0", "label": "B", "done": "0",
                                                       "csrf": csrf})
        assert ok.status_code == 303 and ok.headers["location"].startswith("/review?done=1&undo=")
        assert (await storage.get_verdict("tenant-a", "p0")).label == "B"
        empty = await client.get(ok.headers["location"])
        assert 'id="empty"' in empty.text and '<b id="done">1</b>' in empty.text


class DevTools:
    """The smallest Chrome DevTools protocol client: commands and polling, over aiohttp."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.ws = ws
        self.next_id = 0

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        await self.ws.send_str(json.dumps({"id": mine, "method": method, "params": params}))
        while True:
            message = json.loads((await self.ws.receive(timeout=30)).data)
            if message.get("id") == mine:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    async def wait_for(self, expression: str, timeout: float = browser.WAIT_S) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout
        while asyncio.get_running_loop().time() < deadline:
            try:
                value = await self.evaluate(expression)
            except RuntimeError:  # the page is navigating
                value = None
            if value:
                return value
            await asyncio.sleep(0.05)
        raise TimeoutError(expression)

    async def press(self, key: str) -> None:
        code = {"a": 65, "b": 66, "s": 83}[key]
        for kind in ("keyDown", "keyUp"):
            await self.send("Input.dispatchKeyEvent", type=kind, key=key, text=key if kind == "keyDown" else "",
                            code=f"Key{key.upper()}", windowsVirtualKeyCode=code)


@pytest.mark.skipif(not Path(CHROMIUM).exists(),
                    reason=f"{CHROMIUM} not installed (apt-get install -y chromium): browser test skipped")
async def test_an_annotator_labels_three_items_with_the_keyboard_in_chromium(tmp_path):
    from judgefuse.service.storage import SQLiteStorage

    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=4)
    async with SQLiteStorage(tmp_path / "page.sqlite3") as storage:
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            await _fill(client, 4)
            profile = tmp_path / "chromium-profile"
            proc = await asyncio.create_subprocess_exec(
                CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0",
                f"--user-data-dir={profile}", "about:blank",
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
            )
            try:
                port_file = profile / "DevToolsActivePort"
                for _ in range(600):
                    if port_file.exists() and port_file.read_text().strip():
                        break
                    await asyncio.sleep(0.05)
                port = int(port_file.read_text().split()[0])
                async with aiohttp.ClientSession() as http:
                    async with http.get(f"http://127.0.0.1:{port}/json/list") as r:
                        targets = await r.json()
                    page = next(t for t in targets if t["type"] == "page")
                    async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                        shown, done = await _annotate(DevTools(ws), url)
            finally:
                proc.kill()
                await proc.wait()
                shutil.rmtree(profile, ignore_errors=True)
        labels = {f"p{i}": (await storage.get_verdict("tenant-a", f"p{i}")).label for i in range(4)}
    keyed = dict(zip(shown, "abs", strict=False))  # the items shown when a, b, s were pressed
    assert done == 3
    for question, key in keyed.items():
        vid = "p" + question.strip().rsplit(" ", 1)[1]
        assert labels[vid] == {"a": "A", "b": "B", "s": None}[key], (question, labels)
    assert sum(1 for v in labels.values() if v is not None) == 3


async def _annotate(tools: DevTools, url: str) -> tuple[list[str], int]:
    """Log in by typing the key, then press a, b, s, a: (questions shown, final 'done')."""
    await tools.send("Page.enable")
    await tools.send("Page.navigate", url=f"{url}/review")
    await tools.wait_for("document.getElementById('credential') !== null")
    await tools.evaluate("document.getElementById('credential').focus()")
    await tools.send("Input.insertText", text=KEY)
    await tools.evaluate("document.getElementById('annotator').value = 'browser'")
    await tools.evaluate("document.getElementById('signin').submit()")
    shown = []
    for step, key in enumerate("absa"):
        question = await tools.wait_for("document.getElementById('question') && "
                                        "document.getElementById('question').textContent")
        done = int(await tools.evaluate("document.getElementById('done').textContent"))
        assert done == (step if step < 3 else 2)
        assert KEY not in await tools.evaluate("document.documentElement.outerHTML")
        shown.append(question)
        await tools.press(key)
        # wait for the next page: a different question (or the empty queue)
        await tools.wait_for(
            f"(document.getElementById('empty') !== null) || (document.getElementById('question') "
            f"&& document.getElementById('question').textContent !== {json.dumps(question)})")
    done = int(await tools.wait_for("document.getElementById('done').textContent"))
    depth = int(await tools.evaluate("document.getElementById('depth').textContent"))
    assert depth >= 1  # the skipped item is back in the queue
    return shown, done
