"""The review page's panel picker (issue 47, item 3): each panel the session may use with what
waits in it, and a visit without ``?panel=`` lands on the first panel with work (an annotator
landed on an empty ``default`` while panel ``fast`` had 298 items waiting)."""

from __future__ import annotations

import re

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.storage import SQLiteStorage


async def _fill(client: httpx.AsyncClient, panel: str, n: int) -> None:
    for i in range(n):
        body = {**PAIR, "id": f"{panel}-{i}", "panel": panel, "votes": SPLIT}
        assert (await client.post("/v1/fuse", json=body, headers=H)).status_code == 200


def _picker(html: str) -> dict[str, tuple[int, bool]]:
    """{panel: (waiting, is the panel shown)} from the page's picker."""
    found = re.findall(r'data-panel="([^"]+)" data-waiting="(\d+)" class="([^"]*)"', html)
    return {name: (int(waiting), cls == "here") for name, waiting, cls in found}


async def _sign_in(client: httpx.AsyncClient, credential: str) -> None:
    client.cookies.clear()
    r = await client.post(
        "/signin", data={"credential": credential, "next": "/review"}, headers={"Origin": "http://testserver"}
    )
    assert r.status_code == 303, r.text


async def test_the_picker_counts_each_panel_and_the_page_lands_where_work_waits(tmp_path):
    panels = [
        external_panel(tmp_path, name="default"),
        external_panel(tmp_path, name="fast"),
        external_panel(tmp_path, name="slow"),
    ]
    settings = S.make_settings(tmp_path, panels)
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (_, client):
        await _fill(client, "fast", 4)
        await _fill(client, "slow", 2)
        everyone = (await client.post("/v1/annotators", json={"name": "ann"}, headers=H)).json()["credential"]
        await _sign_in(client, everyone)
        page = (await client.get("/review")).text
        assert "review · panel fast" in page and 'id="question"' in page  # not the empty default
        assert _picker(page) == {"default": (0, False), "fast": (4, True), "slow": (2, False)}
        # an empty panel asked for by name says so and points to the panels with work
        empty = (await client.get("/review", params={"panel": "default"})).text
        assert 'id="empty"' in empty and 'href="/review?panel=fast">fast (3)</a>' in empty
        assert 'href="/review?panel=slow">slow (2)</a>' in empty
        # an annotator limited to panels sees only those, and lands on its first with work
        scoped = (
            await client.post("/v1/annotators", json={"name": "sam", "panels": ["default", "slow"]}, headers=H)
        ).json()["credential"]
        await _sign_in(client, scoped)
        page = (await client.get("/review")).text
        assert "review · panel slow" in page and set(_picker(page)) == {"default", "slow"}
        # one panel to use: no picker at all
        only = (await client.post("/v1/annotators", json={"name": "solo", "panels": ["fast"]}, headers=H)).json()[
            "credential"
        ]
        await _sign_in(client, only)
        page = (await client.get("/review")).text
        assert "review · panel fast" in page and 'id="panels"' not in page
