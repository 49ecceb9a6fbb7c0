"""The CSRF break of issue 23, reproduced in headless Chromium (Selenium with Debian's
chromedriver): a page on another port of the same host (same site, other origin, so the
``SameSite=Strict`` cookie goes along) posts a relabel to itself, and answers 307 to
``/review/label``; Chromium repeats the post there with the annotator's cookie and ``Origin:
null``. Before the guard the label was stored; now it is refused (the null origin, the
cross-origin fetch metadata and the missing form token each refuse it) and nothing changes,
while the annotator's own label from the page still goes through.
"""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from jf_test_support import app_support as S
from jf_test_support import browser
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.app import create_app

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (Path(CHROMIUM).exists() and Path(DRIVER).exists()),
                       reason="chromium and chromium-driver are not installed: browser test skipped"),
]


def _attacker(target: str) -> web.Application:
    """Another origin on the same host: a page that posts to itself (relabel ``?v=`` as B),
    then a 307 to the target."""

    async def index(request: web.Request) -> web.Response:
        verdict_id = re.sub(r"[^\w-]", "", request.query.get("v", ""))
        page = f"""<!doctype html><html><body>
<form method="post" action="/go"><input name="verdict_id" value="{verdict_id}">
<input name="label" value="B"><input name="csrf" value="guessed"></form>
<script>document.forms[0].submit()</script></body></html>"""
        return web.Response(text=page, content_type="text/html")

    async def go(_: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": f"{target}/review/label"})

    app = web.Application()
    app.router.add_get("/", index)
    app.router.add_post("/go", go)
    return app


def _browse(url: str, credential: str, attack_url: str, profile: Path) -> dict[str, str]:
    """Sign in, note the item shown, open the attacker's page, come back: what each showed."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--no-first-run", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        wait = WebDriverWait(driver, browser.WAIT_S)
        driver.get(f"{url}/review")
        wait.until(lambda d: d.find_elements(By.ID, "credential"))
        driver.find_element(By.ID, "credential").send_keys(credential)
        driver.find_element(By.ID, "signin").submit()
        wait.until(lambda d: d.find_elements(By.ID, "question"))
        held = driver.find_element(By.NAME, "verdict_id").get_attribute("value")
        driver.get(f"{attack_url}?v={held}")
        wait.until(lambda d: d.current_url.startswith(url))  # redirected back to the gateway
        attacked = driver.find_element(By.TAG_NAME, "body").text
        driver.get(f"{url}/review")
        wait.until(lambda d: d.find_elements(By.ID, "question"))
        again = driver.find_element(By.NAME, "verdict_id").get_attribute("value")
        driver.find_element(By.ID, "label-a").click()  # the annotator's own post still works
        wait.until(lambda d: d.find_elements(By.ID, "empty") or (
            d.find_elements(By.NAME, "verdict_id")
            and d.find_element(By.NAME, "verdict_id").get_attribute("value") != again))
        return {"held": held, "attacked": attacked, "again": again}
    finally:
        driver.quit()


async def test_a_page_on_another_port_cannot_relabel_through_a_307_in_chromium(tmp_path):
    from judgefuse.service.storage import SQLiteStorage

    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=3)
    async with SQLiteStorage(tmp_path / "csrf.sqlite3") as storage:
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            for i in range(3):
                r = await client.post("/v1/fuse", json={**PAIR, "id": f"p{i}", "votes": SPLIT}, headers=H)
                assert r.status_code == 200, r.text
            created = await client.post("/v1/annotators", json={"name": "victim"}, headers=H)
            credential = created.json()["credential"]
            runner = web.AppRunner(_attacker(url))
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", S.free_port())
            await site.start()
            attack_url = f"http://127.0.0.1:{site._port}/"
            profile = tmp_path / "profile"
            try:
                seen = await asyncio.to_thread(_browse, url, credential, attack_url, profile)
            finally:
                await runner.cleanup()
                shutil.rmtree(profile, ignore_errors=True)
            labels = {f"p{i}": (await storage.get_verdict("tenant-a", f"p{i}")).label for i in range(3)}
    assert "cross-site post refused" in seen["attacked"] or "form token" in seen["attacked"], seen
    assert re.search(r"null|sec-fetch-site|csrf", seen["attacked"]), seen
    assert seen["again"] == seen["held"]  # the attack neither labelled nor moved the held item
    assert labels[seen["held"]] == "A"  # labelled by the annotator, not "B" by the attacker
    assert sum(1 for v in labels.values() if v == "B") == 0
