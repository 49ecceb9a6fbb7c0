"""Label kinds over HTTP on every storage backend: ``POST /v1/feedback`` takes ``tie`` and
``both_bad`` (and a comment), which are stored as such, counted in ``label_kinds`` of
``GET /v1/calibration`` and ``GET /v1/review/stats``, and kept out of every calibration key."""

from __future__ import annotations

from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, H, external_panel


def _labels_in(keys: list[dict], key: str) -> int:
    entry = next(e for e in keys if e["key"] == key)
    return entry["all_time"]["n"]


async def test_ties_and_both_bad_are_counted_apart_from_accuracy(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage=storage) as (_app, client):
        ids = []
        for i in range(4):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"k{i}", "votes": SPLIT}, headers=H)
            assert r.status_code == 200, r.text
            ids.append(r.json()["id"])
        sent = {ids[0]: "A", ids[1]: "tie", ids[2]: "both_bad", ids[3]: "B"}
        for vid, kind in sent.items():
            body = {"verdict_id": vid, "label": kind}
            if kind == "both_bad":
                body["comment"] = "neither answers the question"
            r = await client.post("/v1/feedback", json=body, headers=H)
            assert r.status_code == 200, r.text
            assert (r.json()["status"], r.json()["label"]) == ("labelled", kind)
        assert r.json()["comment"] is None
        stored = (await client.get(f"/v1/verdicts/{ids[2]}", headers=H)).json()
        assert stored["label"] == "both_bad"
        record = await storage.get_verdict("tenant-a", ids[2])
        assert record.label_comment == "neither answers the question"

        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        assert cal["label_kinds"] == {"tie": {"all_time": 1, "window": 1},
                                      "both_bad": {"all_time": 1, "window": 1}}
        assert _labels_in(cal["keys"], "method:majority:fused") == 2  # A and B only
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        assert stats["label_kinds"] == {"tie": 1, "both_bad": 1}
        assert stats["strata"]["review"]["labelled"] == 4  # every kind finishes an item

        r = await client.post("/v1/feedback", json={"verdict_id": ids[1], "label": "B"}, headers=H)
        assert (r.json()["status"], r.json()["previous"]) == ("relabelled", "tie")
        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        assert cal["label_kinds"]["tie"]["all_time"] == 0
        assert _labels_in(cal["keys"], "method:majority:fused") == 3

        for bad, field in (({"label": "C"}, "label"), ({"label": "A", "comment": "x" * 2001}, "comment")):
            r = await client.post("/v1/feedback", json={"verdict_id": ids[0], **bad}, headers=H)
            assert r.status_code == 422, r.text
            assert field in r.text
        assert (await storage.get_verdict("tenant-a", ids[0])).label == "A"
