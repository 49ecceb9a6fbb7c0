"""A verdict's label history over HTTP (every storage backend): labels from the review page
(a name typed with the tenant key), its undo, ``POST /v1/feedback`` with the tenant key and with
an annotator credential, and an inline label, each one entry with who and when, in
``GET /v1/verdicts/{id}`` and on the console's verdict page; never a key or credential."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel

from judgefuse.service.app import create_app

KEY = S.TENANT_KEYS["tenant-a"]


async def test_every_label_relabel_and_undo_is_in_the_verdicts_history(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/v1/fuse", json={**PAIR, "id": "h0", "votes": SPLIT}, headers=H)
        assert r.status_code == 200
        r = await client.post("/v1/fuse", json={**PAIR, "id": "h1", "votes": SPLIT, "label": "B"},
                              headers=H)
        assert r.status_code == 200 and r.json()["label_history"] is None  # only on GET
        # the review page, signed in with the tenant key as "ann": a tie with a comment, undone
        r = await client.post("/review/login", data={"api_key": KEY, "annotator": "ann"})
        assert r.status_code == 303, r.text
        page = (await client.get("/review")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page)[1]
        r = await client.post("/review/label", data={
            "verdict_id": "h0", "label": "tie", "comment": "both fine", "csrf": csrf})
        token = parse_qs(urlsplit(r.headers["location"]).query)["undo"][0]
        r = await client.post("/review/undo", data={"undo": token, "csrf": csrf})
        assert r.status_code == 303, r.text
        # the tenant key on /v1/feedback, then an annotator credential relabelling it
        r = await client.post("/v1/feedback", json={"verdict_id": "h0", "label": "A"}, headers=H)
        assert r.status_code == 200
        created = await client.post("/v1/annotators", json={"name": "bob", "panels": ["ext"]},
                                    headers=H)
        account, credential = created.json()["id"], created.json()["credential"]
        r = await client.post("/v1/feedback", json={"verdict_id": "h0", "label": "B",
                                                     "comment": "B shows its work"},
                              headers={"Authorization": f"Bearer {credential}"})
        assert r.status_code == 200, r.text

        got = await client.get("/v1/verdicts/h0", headers=H)
        assert got.status_code == 200
        history = got.json()["label_history"]
        assert [(e["seq"], e["action"], e["label"], e["previous"], e["by"], e["comment"])
                for e in history] == [
            (1, "labelled", "tie", None, "ann (tenant key)", "both fine"),
            (2, "undone", None, "tie", "ann", None),
            (3, "labelled", "A", None, "api", None),
            (4, "relabelled", "B", "A", f"bob (annotator {account})", "B shows its work"),
        ]
        assert all(e["stratum"] == "review" for e in history)
        assert [e["at"] for e in history] == sorted(e["at"] for e in history)
        assert history[-1]["at"] == got.json()["labelled_at"]
        inline = (await client.get("/v1/verdicts/h1", headers=H)).json()["label_history"]
        assert [(e["action"], e["label"], e["by"]) for e in inline] == [("labelled", "B", "inline")]

        console = await client.get("/console/verdicts/h0", headers=H)
        assert console.status_code == 200
        rows = re.findall(r'<tr data-seq="(\d+)" data-action="(\w+)" data-label="(\w*)">',
                          console.text)
        assert rows == [("1", "labelled", "tie"), ("2", "undone", ""), ("3", "labelled", "A"),
                        ("4", "relabelled", "B")]
        assert "relabelled B (was A)" in console.text and "B shows its work" in console.text
        for text in (got.text, console.text):
            assert KEY not in text and credential not in text
