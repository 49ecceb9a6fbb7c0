"""Headless Chromium through Selenium for the browser tests and the docs' screenshots: Debian's
``/usr/bin/chromium`` and ``/usr/bin/chromedriver``, nothing downloaded, a throwaway profile,
no background networking. ``available()`` says whether this machine has them."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

# How long a browser test waits for a page or an element. Generous on purpose: the waits end as
# soon as the condition holds, so the bound only decides when a stuck page fails, and a cold
# Chromium on a busy 2-core machine (a full suite beside two CPU hogs, load 10+) has taken more
# than the 10-15 s the tests used to allow. The tests assert what the page shows, never how fast.
WAIT_S = 60.0


def available() -> bool:
    return CHROMIUM.exists() and CHROMEDRIVER.exists()


@contextlib.contextmanager
def chromium(width: int = 1400, height: int = 900) -> Iterator[Any]:
    """A headless Chromium WebDriver at ``width`` x ``height``, quit (and its profile removed)
    on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="jf-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--no-first-run",
                "--disable-extensions", "--disable-sync", "--hide-scrollbars",
                f"--user-data-dir={profile}", f"--window-size={width},{height}"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def full_page_png(driver: Any, path: Path, width: int) -> None:
    """A screenshot of the whole page at ``width`` CSS pixels: the viewport is set to the
    page's full height through the DevTools protocol (a window size includes the browser's own
    frame, so growing the window cuts the bottom off)."""
    import base64

    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    height = driver.execute_script(
        "return Math.max(document.documentElement.scrollHeight, document.body.scrollHeight)")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": int(height), "deviceScaleFactor": 1, "mobile": False})
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(base64.b64decode(shot["data"]))


def left_page(element: Any) -> Any:
    """A wait condition: true once ``element``'s document is gone (the click navigated).

    Selenium's ``staleness_of`` expects a ``StaleElementReferenceException``; while Chromium is
    swapping documents, the same question can instead come back as an inspector error ("Node
    with given id does not belong to the document", a plain ``WebDriverException``), which
    means the same thing and failed a fresh-clone run. Both count as gone here; any other
    error is raised."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    def gone(_driver: Any) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    return gone
