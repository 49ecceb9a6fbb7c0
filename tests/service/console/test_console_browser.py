"""The console in a real browser (headless Debian Chromium through Selenium): the verdict list's
filters and paging, and a verdict page opened from the list (with its label history). Open mode (a browser sends no
API key header), a real uvicorn server on loopback, a SQLite store seeded through /v1/fuse."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from jf_test_support import app_support as S
from jf_test_support import browser
from jf_test_support import console_support as C
from jf_test_support import panel_support as P

from judgefuse.service.app import create_app
from judgefuse.service.storage import SQLiteStorage

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not browser.available(), reason="needs Debian's chromium and chromedriver"),
]


def _drive(base: str, seeded: list[dict[str, Any]], post_one: Callable[[], None]) -> dict[str, Any]:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import Select, WebDriverWait

    seen: dict[str, Any] = {}
    with browser.chromium(1400, 900) as driver:
        driver.get(base + "/console/verdicts?panel=ext&limit=25")
        seen["first_page"] = [r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-id]")]
        first_row = driver.find_element(By.CSS_SELECTOR, "tr[data-id]")
        driver.find_element(By.ID, "older").click()
        # a click starts a navigation; wait for the new page before reading it
        WebDriverWait(driver, browser.WAIT_S).until(browser.left_page(first_row))
        seen["second_page"] = [r.get_attribute("data-id") for r in driver.find_elements(By.CSS_SELECTOR, "tr[data-id]")]
        # filters: human review, labelled, wrong
        Select(driver.find_element(By.ID, "f-route")).select_by_value("human_review")
        Select(driver.find_element(By.ID, "f-labelled")).select_by_value("1")
        driver.find_element(By.ID, "f-wrong").click()
        driver.find_element(By.ID, "apply").click()
        WebDriverWait(driver, browser.WAIT_S).until(EC.url_contains("wrong=1"))
        seen["filtered_query"] = parse_qs(urlparse(driver.current_url).query)
        rows = driver.find_elements(By.CSS_SELECTOR, "tr[data-id]")
        seen["filtered"] = [r.get_attribute("data-id") for r in rows]
        seen["wrong_pills"] = len(driver.find_elements(By.CSS_SELECTOR, "tr[data-id] .pill.wrong"))
        # open the first one
        rows[0].find_element(By.CSS_SELECTOR, "a").click()
        WebDriverWait(driver, browser.WAIT_S).until(EC.url_contains("/console/verdicts/"))
        seen["verdict_title"] = driver.find_element(By.TAG_NAME, "h1").text
        seen["judges"] = [r.get_attribute("data-judge") for r in driver.find_elements(By.CSS_SELECTOR, "#votes tr[data-judge]")]
        seen["question"] = driver.find_element(By.CSS_SELECTOR, "pre.question").text
        seen["history"] = [(r.get_attribute("data-action"), r.get_attribute("data-label"),
                            r.find_element(By.CSS_SELECTOR, "[data-by]").text)
                           for r in driver.find_elements(By.CSS_SELECTOR, "#history tr[data-seq]")]
        driver.find_element(By.LINK_TEXT, "« verdicts of ext").click()
        WebDriverWait(driver, browser.WAIT_S).until(lambda d: urlparse(d.current_url).path == "/console/verdicts")
        seen["back"] = urlparse(driver.current_url).path
        # the overview reloads its figures by itself: a verdict posted meanwhile shows up
        driver.get(base + "/console?refresh=2")
        seen["count_before"] = driver.find_element(By.CSS_SELECTOR, '[data-figure="verdicts"] .big').text
        post_one()
        deadline = time.monotonic() + browser.WAIT_S
        while time.monotonic() < deadline:
            try:
                now = driver.find_element(By.CSS_SELECTOR, '[data-figure="verdicts"] .big').text
            except StaleElementReferenceException:  # the figure was replaced while being read
                now = seen["count_before"]
            if now != seen["count_before"]:
                break
            time.sleep(0.25)
        seen["count_after"] = now
        seen["url_after"] = driver.current_url  # refreshed in place, not reloaded elsewhere
    return seen


async def test_filters_paging_and_a_verdict_page_in_chromium(tmp_path):
    storage = SQLiteStorage(tmp_path / "console.sqlite3")
    await storage.open()
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path, audit_rate=0.5)],
                               api_keys={}, metrics_token=None)
    app = create_app(settings, storage=storage, environ={})
    try:
        async with S.uvicorn_server(app) as base:
            import httpx

            async with httpx.AsyncClient(base_url=base) as client:
                seeded = await C.seed(client, storage, n=40, seed=5, tenant="default")
            loop = asyncio.get_running_loop()

            def post_one() -> None:  # from the browser's thread, on the server's loop
                async def post() -> None:
                    async with httpx.AsyncClient(base_url=base) as client:
                        body = {**P.PAIR, "id": "late", "votes": P.SPLIT}
                        assert (await client.post("/v1/fuse", json=body)).status_code == 200
                asyncio.run_coroutine_threadsafe(post(), loop).result(timeout=browser.WAIT_S)

            seen = await asyncio.wait_for(asyncio.to_thread(_drive, base, seeded, post_one), timeout=6 * browser.WAIT_S)
    finally:
        await storage.close()
    newest_first = [v["id"] for v in sorted(seeded, key=lambda v: v["id"], reverse=True)]
    assert seen["first_page"] == newest_first[:25]
    assert seen["second_page"] == newest_first[25:]
    wrong = [v["id"] for v in seeded
             if v["route"] == "human_review" and v.get("given") and v.get("given") != v["choice"]]
    assert wrong, "the seed must hold a wrong reviewed verdict"
    assert seen["filtered_query"] == {"panel": ["ext"], "route": ["human_review"], "labelled": ["1"], "wrong": ["1"]}
    assert sorted(seen["filtered"]) == sorted(wrong) and seen["wrong_pills"] == len(wrong)
    first = seen["filtered"][0]
    assert first in seen["verdict_title"]
    assert seen["judges"] == list(P.EXT)
    assert seen["question"].startswith(f"Question {int(first[1:])}:")
    given = next(v["given"] for v in seeded if v["id"] == first)
    assert seen["history"] == [("labelled", given, "api")]  # the tenant key's POST /v1/feedback
    assert seen["back"] == "/console/verdicts"
    assert (seen["count_before"], seen["count_after"]) == ("40", "41")
    assert seen["url_after"].endswith("/console?refresh=2")
