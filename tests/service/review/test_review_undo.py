"""The annotator page's answers and undo over HTTP (every storage backend): tie and both bad
with a comment, undo within the minute by the annotator who labelled (the label and its
counts gone, the item held again), and undo tokens that are forged, someone else's, stale or
already used refused with 422 naming the field."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.app import create_app

KEY = S.TENANT_KEYS["tenant-a"]


async def _login(client: httpx.AsyncClient, annotator: str) -> str:
    r = await client.post("/review/login", data={"api_key": KEY, "annotator": annotator})
    assert r.status_code == 303, r.text
    page = (await client.get("/review")).text
    return re.search(r'name="csrf" value="([^"]+)"', page)[1]


async def test_tie_comment_and_undo_on_the_page(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for i in range(3):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"u{i}", "votes": SPLIT}, headers=H)
            assert r.status_code == 200
        csrf = await _login(client, "ann")
        page = (await client.get("/review")).text
        first = re.search(r'name="verdict_id" value="([^"]+)"', page)[1]
        r = await client.post("/review/label", data={
            "verdict_id": first, "label": "tie", "comment": " both fine ", "csrf": csrf, "done": "0"})
        assert r.status_code == 303, r.text
        token = parse_qs(urlsplit(r.headers["location"]).query)["undo"][0]
        record = await storage.get_verdict("tenant-a", first)
        assert (record.label, record.label_comment) == ("tie", "both fine")
        page = (await client.get(r.headers["location"])).text
        assert 'id="undo"' in page
        shown = re.search(r'name="verdict_id" value="([^"]+)"', page)[1]
        assert shown != first

        refused = await client.post("/review/undo", data={"undo": token[:-1] + "x", "csrf": csrf})
        assert refused.status_code == 422 and refused.json()["fields"][0]["field"] == "form.undo"
        async with httpx.AsyncClient(base_url=url, timeout=30) as other:  # another annotator
            other_csrf = await _login(other, "bob")
            theirs = await other.post("/review/undo", data={"undo": token, "csrf": other_csrf})
            assert theirs.status_code == 422
        assert (await storage.get_verdict("tenant-a", first)).label == "tie"

        r = await client.post("/review/undo", data={"undo": token, "csrf": csrf,
                                                    "verdict_id": shown, "done": "1"})
        assert r.status_code == 303 and "done=" not in r.headers["location"]  # back to 0 done
        record = await storage.get_verdict("tenant-a", first)
        assert (record.label, record.label_comment) == (None, None)
        page = (await client.get(r.headers["location"])).text
        assert re.search(r'name="verdict_id" value="([^"]+)"', page)[1] == first  # held again
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["label_kinds"]["tie"] == 0 and stats["strata"]["review"]["labelled"] == 0
        assert stats["leased"] == 2  # ann holds only the undone item again, bob his own
        again = await client.post("/review/undo", data={"undo": token, "csrf": csrf})
        assert again.status_code == 422 and "changed since" in again.text

        r = await client.post("/review/label", data={"verdict_id": first, "label": "both_bad",
                                                     "csrf": csrf, "comment": "x" * 2001})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "form.comment"


async def test_an_annotator_accounts_undo_is_in_its_history(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/v1/fuse", json={**PAIR, "id": "h0", "votes": SPLIT}, headers=H)
        assert r.status_code == 200
        created = await client.post("/v1/annotators", json={"name": "ann", "panels": ["ext"]},
                                    headers=H)
        credential = created.json()["credential"]
        r = await client.post("/review/login", data={"api_key": credential})
        assert r.status_code == 303, r.text
        page = (await client.get("/review")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)[1]
        r = await client.post("/review/label", data={"verdict_id": "h0", "label": "both_bad",
                                                     "csrf": csrf})
        token = parse_qs(urlsplit(r.headers["location"]).query)["undo"][0]
        r = await client.post("/review/undo", data={"undo": token, "csrf": csrf})
        assert r.status_code == 303 and (await storage.get_verdict("tenant-a", "h0")).label is None
        me = await client.get("/v1/annotators/me", headers={"Authorization": f"Bearer {credential}"})
        assert [(e["verdict_id"], e["status"]) for e in me.json()["labels"]] == [
            ("h0", "undone"), ("h0", "labelled")]
