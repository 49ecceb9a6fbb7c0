"""One operator console (issue 47, items 2 and 7): /dashboard redirects to the console's
calibration page; every card names its source and says "no evidence yet" (never a green "ok")
until it has evidence; the learning section and ``GET /v1/fusion/refits`` list every refit with
its outcome and reason, whatever started it."""

from __future__ import annotations

import re

from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold

from judgefuse.service.storage import SQLiteStorage

BROWSER = {"Accept": "text/html"}
SAME_ORIGIN = {**BROWSER, "Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}


def _card(html: str, figure: str) -> str:
    start = html.index(f'data-figure="{figure}"')
    return html[start : html.index('<div class="src">', start)]


async def test_dashboard_redirects_into_the_console(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (_, client):
        for query, target in (("", "/console/calibration"), ("?panel=ext", "/console/calibration?panel=ext")):
            r = await client.get("/dashboard" + query, headers=BROWSER)
            assert r.status_code == 307 and r.headers["location"] == target
        page = await client.get("/console/calibration", headers={**BROWSER, **H})
        assert page.status_code == 200 and 'class="here">Calibration</a>' in page.text
        assert "this process since it started" in page.text and "the store (GET /v1/calibration)" in page.text
        assert "/dashboard" not in (await client.get("/console", headers={**BROWSER, **H})).text
        operator = await client.get("/console/calibration", headers={**BROWSER, **S.admin()})
        assert operator.status_code == 200 and 'data-tenant="tenant-b"' in operator.text


async def test_no_evidence_yet_until_there_is_evidence(tmp_path):
    """A tuned threshold and no audit label: the monitor is not a green "ok" (its bound is
    [0, 1]); the precision card and an estimate backed only by unsolicited labels say why."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.0)])
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (_, client):
        await put_threshold(storage)
        for i in range(4):  # auto-accepted, none audited: labels on them are unsolicited
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"u{i}", "votes": UNANIMOUS}, headers=H)
            assert r.json()["route"] == "auto_accept"
            r = await client.post("/v1/feedback", json={"verdict_id": f"u{i}", "label": "A"}, headers=H)
            assert r.status_code == 200
        html = (await client.get("/console", headers={**BROWSER, **H})).text
        monitor = _card(html, "monitor")
        assert "no evidence yet" in monitor and 'class="big ok"' not in monitor and ">ok<" not in monitor
        assert "0 audit labels" in monitor
        assert "no evidence yet" in _card(html, "precision")
        for figure in ("verdicts", "auto-rate", "precision", "queue", "monitor", "loop-lag", "refused"):
            start = html.index(f'data-figure="{figure}"')
            assert '<div class="src">' in html[start : html.index("</div>\n", start) + 400], figure
        calibration = (await client.get("/console/calibration", headers={**BROWSER, **H})).text
        row = calibration[calibration.index('<tr data-key="method:majority:fused">') :]
        row = row[: row.index("</tr>")]
        assert "no evidence yet" in row and "4 labels of verdicts never queued (unsolicited)" in row
        monitor_row = calibration[calibration.index('<table class="monitor">') :]
        assert "no evidence yet" in monitor_row[: monitor_row.index("</table>")]

        # a verdict routed to review and labelled there is no audit label: still no evidence
        await client.post("/v1/fuse", json={**PAIR, "id": "r0", "votes": SPLIT, "label": "A"}, headers=H)
        assert "no evidence yet" in _card((await client.get("/console", headers={**BROWSER, **H})).text, "monitor")


async def test_the_cards_show_figures_once_there_is_evidence(tmp_path):
    """Issue 47, item 6, both ways: before any verdict the auto-accept rate, the precision and
    the monitor (threshold tuned) say "no evidence yet" and nothing is green; one audited,
    labelled auto-accept gives each its figure, and the monitor its state."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)])
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (_, client):
        await put_threshold(storage)
        html = (await client.get("/console", headers={**BROWSER, **H})).text
        for figure in ("auto-rate", "precision", "monitor"):
            assert "no evidence yet" in _card(html, figure), figure
        assert "nothing auto-accepted in the window" in _card(html, "precision")
        assert 'class="big ok"' not in html

        r = await client.post("/v1/fuse", json={**PAIR, "id": "a0", "votes": UNANIMOUS}, headers=H)
        assert r.json()["route"] == "auto_accept" and r.json()["review"]["stratum"] == "audit"
        assert (await client.post("/v1/feedback", json={"verdict_id": "a0", "label": "A"}, headers=H)).status_code == 200
        html = (await client.get("/console", headers={**BROWSER, **H})).text
        for figure in ("auto-rate", "precision", "monitor"):
            assert "no evidence yet" not in _card(html, figure), figure
        assert "100.0%" in _card(html, "auto-rate")
        assert re.search(r'<span class="labels">1</span> labels behind', _card(html, "precision"))
        monitor = _card(html, "monitor")
        assert '<div class="big ok"><span class="state">ok</span>' in monitor and "1 audit labels" in monitor


async def test_every_refit_is_listed_with_its_outcome_and_reason(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=30, review_session_secret="s")
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage, S.running_app(settings, storage) as (_, client):
        for i in range(5):
            await client.post("/v1/fuse", json={**PAIR, "id": f"v{i}", "votes": SPLIT, "label": "A"}, headers=H)
        empty = (await client.get("/v1/fusion/refits", params={"panel": "ext"}, headers=H)).json()
        assert empty["refits"] == [] and empty["active_method"] == "majority"
        outcome = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert outcome["status"] == "skipped"
        # the operator's button, from a signed-in session
        r = await client.post("/v1/annotators", json={"name": "olga", "role": "operator"}, headers=H)
        client.cookies.clear()
        await client.post("/signin", data={"credential": r.json()["credential"]}, headers=SAME_ORIGIN)
        page = (await client.get("/console", headers=BROWSER)).text
        csrf = re.search(r'action="/console/refit".*?name="csrf" value="([^"]+)"', page, re.S)[1]
        done = await client.post("/console/refit", data={"panel": "ext", "csrf": csrf}, headers=SAME_ORIGIN)
        assert done.status_code == 303 and done.headers["location"] == "/console?panel=ext#learning-ext"

        refits = (await client.get("/v1/fusion/refits", params={"panel": "ext"}, headers=H)).json()["refits"]
        assert [(e["trigger"], e["status"]) for e in refits] == [("console (olga)", "skipped"), ("api", "skipped")]
        assert all(e["reason"] == outcome["reason"] and e["n_labels"] == 5 and e["at"] > 0 for e in refits)
        assert "30" in outcome["reason"]  # why: fewer labels than min_labels_for_refit
        page = (await client.get("/console", headers=BROWSER)).text
        learning = page[page.index('id="learning-ext"') :]
        learning = learning[: learning.index("</table>")]
        assert learning.count('data-status="skipped"') == 2 and "console (olga)" in learning
        assert "at least 30 are needed to fit learned fusion" in learning
        # a viewer sees the log, not the button
        r = await client.post("/v1/annotators", json={"name": "vic", "role": "viewer"}, headers=H)
        client.cookies.clear()
        await client.post("/signin", data={"credential": r.json()["credential"]}, headers=SAME_ORIGIN)
        page = (await client.get("/console", headers=BROWSER)).text
        assert 'data-status="skipped"' in page and 'action="/console/refit"' not in page
