"""The annotator page in a real browser: Selenium driving Debian's Chromium through Debian's
chromedriver (headless, no network of its own, a throwaway profile; nothing is downloaded).

One annotator session over a live server on loopback: sign in with the keyboard, label A,
write a comment and answer tie, undo it (the same item comes back, its label gone from
storage), answer both bad, skip, reload (the held item stays), sign out. Every item carries an
XSS payload in answer A (it must arrive as text: no element, no script run) and a Markdown
code block and math in answer B (rendered as ``<pre><code>`` and a math span).
With ``JF_SCREENSHOT_DIR`` set the page is also saved at 1400 and 800 px wide (the
screenshots in docs/review-loop.md are made that way).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support.browser import WAIT_S, available, chromium, full_page_png, left_page
from jf_test_support.panel_support import SPLIT, H, external_panel

from judgefuse.service.app import create_app

KEY = S.TENANT_KEYS["tenant-a"]
XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>'
QUESTION = ("Write `is_prime(n)` in Python and state its cost for $n \\ge 2$.\n\n"
            "Which answer is **correct**?")
ANSWER_B = ("Trial division up to $\\sqrt{n}$:\n\n```python\ndef is_prime(n):\n"
            "    return n > 1 and all(n % d for d in range(2, int(n**0.5) + 1))\n```\n\n"
            "Cost: $$O(\\sqrt{n})$$ divisions.")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not available(),
                       reason="chromium / chromium-driver not installed (apt-get install chromium-driver)"),
]


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium(1400, 1000) as driver:
        yield driver


async def test_an_annotation_session_in_chromium(tmp_path, browser):
    from judgefuse.service.storage import SQLiteStorage

    # two panels, the first without work: the page lands on the one with work, and its panel
    # picker shows both with their waiting counts
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, name="quiet"), external_panel(tmp_path)],
                               review_seed=5)
    async with SQLiteStorage(tmp_path / "page.sqlite3") as storage:
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            for i in range(6):
                r = await client.post("/v1/fuse", json={
                    "id": f"p{i}", "panel": "ext", "question": QUESTION, "answer_a": f"{XSS} answer {i}",
                    "answer_b": ANSWER_B, "votes": SPLIT}, headers=H)
                assert r.status_code == 200, r.text
            labels = await asyncio.to_thread(_session, browser, url)
            for vid, (kind, comment) in labels.items():
                record = await storage.get_verdict("tenant-a", vid)
                assert (record.label, record.label_comment) == (kind, comment), vid
            stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
            assert stats["label_kinds"] == {"tie": 0, "both_bad": 1}
            assert stats["strata"]["review"]["labelled"] == 2  # A and both bad; the tie undone


def _session(driver: Any, url: str) -> dict[str, tuple[str | None, str | None]]:
    """The annotator's keystrokes; returns what storage must hold per verdict id."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(driver, WAIT_S)

    def shown() -> str:
        return driver.find_element(By.CSS_SELECTOR, "#label-form input[name=verdict_id]").get_attribute("value")

    def number(element_id: str) -> int:
        return int(driver.find_element(By.ID, element_id).text)

    def press(keys: str, *, then: Callable[[Any], Any] | None = None) -> None:
        old = driver.find_element(By.TAG_NAME, "main")
        driver.find_element(By.TAG_NAME, "body").send_keys(keys)
        wait.until(left_page(old))
        wait.until(ec.presence_of_element_located((By.ID, "progress")))

    driver.get(f"{url}/review")
    wait.until(ec.presence_of_element_located((By.ID, "credential"))).send_keys(KEY)
    driver.find_element(By.ID, "annotator").send_keys("selenium", Keys.ENTER)
    wait.until(ec.presence_of_element_located((By.ID, "label-form")))
    assert KEY not in driver.page_source
    # landed on the panel with work; the picker names both panels with what waits in each (here:
    # the item shown too, as "remaining" counts it)
    picker = {a.get_attribute("data-panel"): (a.get_attribute("data-waiting"), a.get_attribute("class"))
              for a in driver.find_elements(By.CSS_SELECTOR, "#panels a")}
    assert picker == {"quiet": ("0", "idle"), "ext": ("6", "here")}, picker
    # the payload is text: no element made from it, no script run; Markdown rendered
    answer_a = driver.find_element(By.ID, "answer_a")
    assert "<script>window.__xss=2</script>" in answer_a.text and "onerror" in answer_a.text
    assert answer_a.find_elements(By.CSS_SELECTOR, "img, script") == []
    assert driver.execute_script("return window.__xss === undefined")
    code = driver.find_element(By.CSS_SELECTOR, "#answer_b pre code.language-python")
    assert "def is_prime(n):\n    return n > 1" in code.text
    assert [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#answer_b .math")] == ["\\sqrt{n}", "O(\\sqrt{n})"]
    assert driver.find_element(By.CSS_SELECTOR, "#question code").text == "is_prime(n)"
    assert driver.find_elements(By.ID, "verdict") == []  # the panel did not opt in
    for key, button in (("a", "label-a"), ("b", "label-b"), ("t", "label-tie"),
                        ("x", "label-both-bad"), ("s", "skip")):
        assert driver.find_element(By.CSS_SELECTOR, f"#{button} kbd").text == key  # shown
    remaining = number("depth")
    _screenshots(driver)

    expect: dict[str, tuple[str | None, str | None]] = {}
    first = shown()
    press("a")
    expect[first] = ("A", None)
    assert number("done") == 1 and number("depth") == remaining - 1 and shown() != first

    tied = shown()
    driver.find_element(By.TAG_NAME, "body").send_keys("c")
    driver.switch_to.active_element.send_keys("the same answer twice", Keys.ESCAPE)
    press("t")
    assert number("done") == 2 and driver.find_element(By.ID, "undo").is_displayed()
    press("u")  # the tie is taken back: that item is shown again, nothing stored for it
    assert shown() == tied and number("done") == 1
    assert driver.find_elements(By.ID, "undo") == []
    press("x")
    expect[tied] = ("both_bad", None)
    assert (number("ties"), number("both-bad")) == (0, 1)  # the page counts them apart

    skipped = shown()
    press("s")
    expect[skipped] = (None, None)
    held = shown()
    assert held != skipped and number("done") == 2
    driver.refresh()  # a reload shows the item already held, no new lease
    wait.until(ec.presence_of_element_located((By.ID, "label-form")))
    assert shown() == held

    driver.find_element(By.ID, "logout").click()
    wait.until(ec.presence_of_element_located((By.ID, "credential")))
    driver.get(f"{url}/review")
    assert driver.find_elements(By.ID, "credential") and not driver.find_elements(By.ID, "label-form")
    expect[held] = (None, None)
    return expect


def _screenshots(driver: Any) -> None:
    """The annotation page at 1400 and 800 px wide, when ``JF_SCREENSHOT_DIR`` is set."""
    folder = os.environ.get("JF_SCREENSHOT_DIR")
    if not folder:
        return
    for width in (1400, 800):
        full_page_png(driver, Path(folder) / f"review-page-{width}.png", width)


async def test_two_tabs_hold_one_item_and_a_revoked_credential_is_signed_out_in_chromium(tmp_path, browser):
    """An annotator account in a real browser: a second tab shows the item the first holds (one
    lease), and once the tenant revokes the credential the next load of either tab is the
    sign-in page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from judgefuse.service.storage import SQLiteStorage

    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=5)
    async with SQLiteStorage(tmp_path / "tabs.sqlite3") as storage:
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            for i in range(4):
                r = await client.post("/v1/fuse", json={
                    "id": f"t{i}", "question": f"Question {i}", "answer_a": "yes", "answer_b": "no",
                    "votes": SPLIT}, headers=H)
                assert r.status_code == 200, r.text
            created = await client.post("/v1/annotators", json={"name": "tabs"}, headers=H)
            assert created.status_code == 201, created.text
            credential = created.json()["credential"]

            async def leased() -> int:
                stats = await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)
                return int(stats.json()["leased"])

            def held_id() -> str:
                return browser.find_element(
                    By.CSS_SELECTOR, "#label-form input[name=verdict_id]").get_attribute("value")

            def sign_in_and_open_a_second_tab() -> tuple[str, str]:
                wait = WebDriverWait(browser, WAIT_S)
                browser.get(f"{url}/review")
                wait.until(ec.presence_of_element_located((By.ID, "credential"))).send_keys(credential, Keys.ENTER)
                wait.until(ec.presence_of_element_located((By.ID, "label-form")))
                first = held_id()
                browser.switch_to.new_window("tab")
                browser.get(f"{url}/review")
                wait.until(ec.presence_of_element_located((By.ID, "label-form")))
                return first, held_id()

            first, second = await asyncio.to_thread(sign_in_and_open_a_second_tab)
            assert first == second and await leased() == 1
            revoked = await client.post(f"/v1/annotators/{created.json()['id']}/revoke", headers=H)
            assert revoked.status_code == 200, revoked.text

            def reload_both_tabs() -> list[bool]:
                signed_out = []
                for handle in browser.window_handles:
                    browser.switch_to.window(handle)
                    browser.get(f"{url}/review")
                    WebDriverWait(browser, WAIT_S).until(ec.presence_of_element_located((By.TAG_NAME, "body")))
                    signed_out.append(bool(browser.find_elements(By.ID, "credential"))
                                      and not browser.find_elements(By.ID, "label-form"))
                for handle in browser.window_handles[1:]:
                    browser.switch_to.window(handle)
                    browser.close()
                browser.switch_to.window(browser.window_handles[0])
                return signed_out

            assert await asyncio.to_thread(reload_both_tabs) == [True, True]
