"""Signing in to the console in a real browser (headless Debian Chromium through Selenium), tenant
keys set (issue 47, item 1): /console without a session shows the sign-in page; an operator signs
in and sees the overview, and /dashboard takes it to the console's calibration page; a viewer's
post is refused; an annotator reaching /console is refused.
One server, one browser, every wait bounded. With ``JF_SCREENSHOT_DIR`` set, the sign-in page is
saved there (docs/console.md's screenshot is made that way)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support import browser
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.app import create_app
from judgefuse.service.storage import SQLiteStorage

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not browser.available(), reason="needs Debian's chromium and chromedriver"),
]


def _drive(base: str, credentials: dict[str, str]) -> dict[str, Any]:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    seen: dict[str, Any] = {}
    shots = os.environ.get("JF_SCREENSHOT_DIR")
    with browser.chromium(1400, 900) as driver:
        wait = WebDriverWait(driver, browser.WAIT_S)

        def sign_in(credential: str) -> None:
            box = wait.until(ec.presence_of_element_located((By.ID, "credential")))
            box.send_keys(credential)
            driver.find_element(By.ID, "signin-button").click()
            wait.until(browser.left_page(box))

        def sign_out() -> None:
            button = (
                driver.find_element(By.ID, "signout")
                if driver.find_elements(By.ID, "signout")
                else driver.find_element(By.ID, "logout")
            )
            button.click()
            wait.until(browser.left_page(button))

        driver.get(base + "/console")
        wait.until(ec.presence_of_element_located((By.ID, "credential")))
        seen["signin_url"] = driver.current_url
        seen["signin_label"] = driver.find_element(By.CSS_SELECTOR, "label[for=credential]").text
        seen["signin_text"] = driver.find_element(By.TAG_NAME, "main").text
        if shots:
            browser.full_page_png(driver, Path(shots) / "signin.png", 1000)

        # the operator: back on the overview it asked for
        sign_in(credentials["operator"])
        wait.until(ec.presence_of_element_located((By.ID, "overview")))
        seen["operator_url"] = driver.current_url
        seen["operator_title"] = driver.find_element(By.TAG_NAME, "h1").text
        seen["operator_who"] = driver.find_element(By.ID, "who").text
        driver.get(base + "/dashboard")  # moved into the console: it redirects
        wait.until(ec.url_contains("/console/calibration"))
        seen["dashboard"] = (driver.current_url, driver.find_element(By.TAG_NAME, "h1").text)
        driver.back()
        wait.until(ec.presence_of_element_located((By.ID, "overview")))
        seen["operator_panels"] = [
            s.get_attribute("data-panel") for s in driver.find_elements(By.CSS_SELECTOR, "section.panel[data-panel]")
        ]
        sign_out()

        # the viewer: reads the overview; a post (built with its own form token) is refused
        driver.get(base + "/console")
        sign_in(credentials["viewer"])
        wait.until(ec.presence_of_element_located((By.ID, "overview")))
        seen["viewer_who"] = driver.find_element(By.ID, "who").text
        seen["viewer_buttons"] = len(driver.find_elements(By.CSS_SELECTOR, "form[action^='/console/']"))
        driver.execute_script("""
            var token = document.querySelector("form[action='/signout'] input[name=csrf]").value;
            var form = document.createElement("form");
            form.method = "post"; form.action = "/console/monitor/clear";
            [["csrf", token], ["panel", "ext"]].forEach(function (pair) {
              var input = document.createElement("input");
              input.type = "hidden"; input.name = pair[0]; input.value = pair[1]; form.appendChild(input);
            });
            document.body.appendChild(form); form.submit();""")
        refused = wait.until(ec.presence_of_element_located((By.ID, "refused")))
        seen["viewer_post"] = refused.text
        driver.get(base + "/console")
        sign_out()

        # the annotator: sent to /review; /console refuses it with a page saying where to go
        driver.get(base + "/console")
        sign_in(credentials["annotator"])
        wait.until(ec.presence_of_element_located((By.ID, "progress")))
        seen["annotator_landed"] = driver.current_url
        driver.get(base + "/console")
        refused = wait.until(ec.presence_of_element_located((By.ID, "refused")))
        seen["annotator_console"] = refused.text
        seen["annotator_home"] = driver.find_element(By.ID, "home").get_attribute("href")
    return seen


async def test_sign_in_roles_in_chromium(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with SQLiteStorage(tmp_path / "signin.sqlite3") as storage:
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as base, httpx.AsyncClient(base_url=base, timeout=30) as client:
            for i in range(3):
                r = await client.post("/v1/fuse", json={**PAIR, "id": f"s{i}", "votes": SPLIT}, headers=H)
                assert r.status_code == 200, r.text
            credentials = {}
            for role, name in (("operator", "olga"), ("viewer", "vic"), ("annotator", "ann")):
                r = await client.post("/v1/annotators", json={"name": name, "role": role}, headers=H)
                assert r.status_code == 201, r.text
                credentials[role] = r.json()["credential"]
            seen = await asyncio.wait_for(asyncio.to_thread(_drive, base, credentials), timeout=6 * browser.WAIT_S)
    assert seen["signin_url"].endswith("/console")  # the page asked for, showing the form
    assert "API key of your tenant" not in seen["signin_text"]
    assert seen["signin_label"] == "Your credential"
    assert seen["operator_url"].endswith("/console") and seen["operator_title"].startswith("Overview")
    assert "olga" in seen["operator_who"] and "(operator)" in seen["operator_who"]
    assert seen["operator_panels"] == ["ext"]
    assert seen["dashboard"][0].endswith("/console/calibration") and seen["dashboard"][1] == "Calibration"
    assert "(viewer)" in seen["viewer_who"] and seen["viewer_buttons"] == 0
    assert "read-only" in seen["viewer_post"]
    assert seen["annotator_landed"].endswith("/review")
    assert "annotator account" in seen["annotator_console"]
    assert seen["annotator_home"].endswith("/review")
