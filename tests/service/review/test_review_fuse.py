"""The review loop's decision-time half, through the app on both storage backends: POST
/v1/fuse (bring your own votes) takes the /v1/judge path; every verdict is stamped with its
review stratum and inclusion probability when decided (a seeded audit draw whose share matches
audit_rate, never rewritten by a later audit_rate); traffic counters and the per-stratum label
accumulators match a recount from the stored records exactly, relabels included; bad input is a
4xx naming the field with nothing written."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold, votes

from judgefuse.service.ledger import ALL_METHODS, label_increments, label_stratum_key, traffic_key


async def test_audit_draw_is_seeded_its_share_matches_the_rate_and_a_new_rate_rewrites_nothing(
    storage, tmp_path
):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.2)], review_seed=7)
    await put_threshold(storage)
    stamps = []
    async with S.running_app(settings, storage) as (app, client):
        for i in range(400):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"v{i}", "votes": UNANIMOUS}, headers=H)
            assert r.status_code == 200, r.text
            body = r.json()
            assert body["route"] == "auto_accept"
            stamps.append(body["review"])
        for i in range(20):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"r{i}", "votes": SPLIT}, headers=H)
            review = r.json()["review"]
            assert review == {"queued": True, "reason": "below_threshold", "stratum": "review",
                              "inclusion_probability": 1.0, "audit_rate": 0.2,
                              "threshold_version": 1}
    audited = sum(s["stratum"] == "audit" for s in stamps)
    # binomial(400, 0.2): mean 80, sd 8; printed next to the target
    print(f"audit share {audited / 400:.3f} (target audit_rate 0.200)")
    assert abs(audited - 80) <= 4 * 8
    assert all(s["inclusion_probability"] == (0.2 if s["stratum"] == "audit" else 0.0) for s in stamps)
    assert {s["reason"] for s in stamps} == {"audit", "auto_accept"}
    assert all(s["queued"] == (s["stratum"] == "audit") for s in stamps)

    # the same seed draws the same strata, on a fresh store
    again = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.2)], review_seed=7,
                            storage_url=f"sqlite:///{tmp_path / 'again.sqlite3'}")
    from judgefuse.service.storage import SQLiteStorage

    async with SQLiteStorage(tmp_path / "again.sqlite3") as fresh:
        await put_threshold(fresh)
        async with S.running_app(again, fresh) as (_app, client):
            replay = [(await client.post("/v1/fuse", json={**PAIR, "id": f"v{i}", "votes": UNANIMOUS},
                                         headers=H)).json()["review"]["stratum"] for i in range(400)]
    assert replay == [s["stratum"] for s in stamps]

    # the panel's audit rate changes (a new panel file, same store): old stamps stay as drawn
    changed = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.5)], review_seed=8)
    async with S.running_app(changed, storage) as (_app, client):
        for i in range(40):
            r = await client.post("/v1/fuse", json={**PAIR, "id": f"w{i}", "votes": UNANIMOUS}, headers=H)
            assert r.json()["review"]["audit_rate"] == 0.5
        for i in (0, 1, 2, 399):
            stored = (await client.get(f"/v1/verdicts/v{i}", headers=H)).json()["review"]
            assert stored == {**stamps[i], "threshold_version": 1}
    for i in range(400):
        record = await storage.get_verdict("tenant-a", f"v{i}")
        assert record.review.audit_rate == 0.2
        assert record.review.stratum == stamps[i]["stratum"]
        assert record.threshold_version == 1
    # traffic counters per stratum: N_s for the estimators
    counts = {k: (await storage.read_accumulator("tenant-a", traffic_key("ext", ALL_METHODS, k))).get("n", 0)
              for k in ("review", "auto@0.2", "auto@0.5")}
    assert counts == {"review": 20, "auto@0.2": 400, "auto@0.5": 40}
    assert (await storage.read_accumulator("tenant-a", traffic_key("ext", "majority", "auto@0.2")))["n"] == 400


async def test_relabels_move_every_accumulator_exactly_as_a_recount_per_stratum(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.3)], review_seed=3)
    await put_threshold(storage)
    ids = []
    async with S.running_app(settings, storage) as (_app, client):
        for i in range(60):
            body = {**PAIR, "id": f"x{i}", "votes": UNANIMOUS if i % 3 else SPLIT}
            if i % 7 == 0:
                body["votes"] = votes("A", None, "B")  # undecided-ish: 1-1 with an abstention
            r = await client.post("/v1/fuse", json=body, headers=H)
            assert r.status_code == 200, r.text
            ids.append(f"x{i}")
        for i, vid in enumerate(ids):  # label all (unsolicited ones too), then relabel a third
            label = "A" if i % 4 else "B"
            assert (await client.post("/v1/feedback", json={"verdict_id": vid, "label": label},
                                      headers=H)).status_code == 200
        for i, vid in enumerate(ids):
            if i % 3 == 0:
                r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": "B" if i % 4 else "A"},
                                      headers=H)
                assert r.json()["status"] == "relabelled"
    records = [await storage.get_verdict("tenant-a", vid) for vid in ids]
    expected: dict[str, Counter] = {}
    for record in records:
        for key, fields in label_increments(record, record.label).items():
            expected.setdefault(key, Counter()).update(fields)
    strata = Counter(label_stratum_key(r) for r in records)
    assert set(strata) == {"review", "auto@0.3", "unsolicited"}, strata
    stratum_keys = [k for k in expected if k.count("/") == 4]
    assert {k.rsplit("/", 1)[1] for k in stratum_keys} == {"review", "auto%400.3", "unsolicited"}
    for key, fields in expected.items():
        stored = await storage.read_accumulator("tenant-a", key)
        assert {f: v for f, v in stored.items() if v} == {f: v for f, v in fields.items() if v}, key


async def test_fuse_and_judge_store_the_same_verdict_for_the_same_votes(storage, stub, tmp_path):
    server, script = stub
    script.set("j1", "A", 90)
    script.set("j2", "B", 70)
    script.set("j3", "A", 60)
    panel = S.panel_yaml(tmp_path, server.url)
    text = panel.read_text() + "audit_rate: 1.0\n"
    panel.write_text(text)
    # the same judges, declared external: only such judges take posted votes
    mirror = tmp_path / "panel-mirror.yaml"
    mirror.write_text("name: mirror\nfusion: majority\nquorum: 2\naudit_rate: 1.0\njudges:\n"
                      + "".join(f"  - {{name: {j}, external: true}}\n" for j in S.JUDGES))
    settings = S.make_settings(tmp_path, [panel, mirror])
    async with S.running_app(settings, storage) as (_app, client):
        for threshold in (None, 0.6):
            if threshold is not None:
                await put_threshold(storage, threshold, panel="main")
                await put_threshold(storage, threshold, panel="mirror")
            judged = await client.post("/v1/judge", json={**PAIR, "id": f"judged-{threshold}"}, headers=H)
            assert judged.status_code == 200, judged.text
            posted = [{k: v[k] for k in ("judge", "choice", "confidence", "p_a", "mode")}
                      for v in judged.json()["votes"]]
            fused = await client.post("/v1/fuse", json={**PAIR, "id": f"fused-{threshold}", "votes": posted,
                                                        "panel": "mirror"}, headers=H)
            assert fused.status_code == 200, fused.text
            a = await storage.get_verdict("tenant-a", f"judged-{threshold}")
            b = await storage.get_verdict("tenant-a", f"fused-{threshold}")
            for field in ("choice", "confidence", "p_a", "route", "method", "threshold"):
                assert getattr(a.verdict, field) == getattr(b.verdict, field), field
            assert [(v.judge, v.choice, v.confidence, v.p_a) for v in a.verdict.votes] == \
                   [(v.judge, v.choice, v.confidence, v.p_a) for v in b.verdict.votes]
            assert a.review.stratum == b.review.stratum
            assert a.review.inclusion_probability == b.review.inclusion_probability
            assert a.threshold_version == b.threshold_version
        assert a.review.stratum == "audit" and a.verdict.route == "auto_accept"  # rate 1.0: all audited
    assert len(server.requests) == 6  # /v1/fuse called no judge


async def test_fuse_votes_from_p_a_abstentions_and_absent_judges(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage) as (app, client):
        judges = app.state.gateway.panels["ext"].panel.judges
        assert [j.started for j in judges] == [False, False, False]  # no provider client at all
        asked = await client.post("/v1/judge", json=PAIR, headers=H)  # external judges cannot be asked
        assert asked.status_code == 503 and "external judge" in asked.text
        r = await client.post("/v1/fuse", json={**PAIR, "votes": [
            {"judge": "e1", "p_a": 0.8}, {"judge": "e2", "p_a": 0.3, "mode": "logprob"},
            {"judge": "e3", "choice": None, "confidence": None}]}, headers=H)
        assert r.status_code == 200, r.text
        out = r.json()
        assert [(v["judge"], v["choice"], v["mode"]) for v in out["votes"]] == [
            ("e1", "A", "sc"), ("e2", "B", "logprob"), ("e3", None, "sc")]
        assert math.isclose(out["votes"][1]["confidence"], 0.7)
        assert out["degraded"] is True and out["review"]["reason"] == "no_threshold"
        r = await client.post("/v1/fuse", json={**PAIR, "votes": votes("B", "B")}, headers=H)
        assert r.status_code == 200
        assert r.json()["failed_judges"] == [{"judge": "e3", "reason": "no vote posted for this judge"}]
        batch = await client.post("/v1/fuse/batch", json={"items": [
            {**PAIR, "votes": UNANIMOUS}, {**PAIR, "votes": votes("A")}]}, headers=H)
        assert batch.status_code == 200
        results = batch.json()["results"]
        assert results[0]["status"] == 200 and results[1]["status"] == 422
        assert results[1]["error"]["fields"][0]["field"] == "body.items[1].votes"


async def test_a_posted_p_a_of_one_half_is_a_tie_vote_and_choice_null_an_abstention(storage, tmp_path):
    """The service's contract and ``JudgeVote.from_p_a`` agree: ``p_a`` 0.5 without a choice is a
    tie vote (majority 2.5 / 3, stored with ``tie``); ``"choice": null`` abstains (majority 1.0)."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage) as (_app, client):
        tied = await client.post("/v1/fuse", json={**PAIR, "id": "tied", "votes": [
            *votes("A", "A"), {"judge": "e3", "p_a": 0.5}]}, headers=H)
        abstained = await client.post("/v1/fuse", json={**PAIR, "id": "abstained", "votes": [
            *votes("A", "A"), {"judge": "e3", "choice": None, "p_a": 0.5}]}, headers=H)
    assert tied.status_code == 200 and abstained.status_code == 200, (tied.text, abstained.text)
    assert math.isclose(tied.json()["confidence"], 2.5 / 3.0)
    assert abstained.json()["confidence"] == 1.0
    assert [(v["choice"], v["p_a"], v["error"]) for v in tied.json()["votes"]][2] == (None, 0.5, None)
    assert abstained.json()["votes"][2]["error"] == "abstained (posted vote)"
    # a tie is an answer: the tie judge did not fail, so the verdict is not degraded by it
    assert (tied.json()["degraded"], tied.json()["failed_judges"]) == (False, [])
    assert abstained.json()["degraded"] is True
    assert [f["judge"] for f in abstained.json()["failed_judges"]] == ["e3"]
    stored = await storage.get_verdict("tenant-a", "tied")
    assert [v.tie for v in stored.verdict.votes] == [False, False, True]


@pytest.mark.parametrize(("body", "field"), [
    ({**PAIR, "votes": [{"judge": "nobody", "choice": "A", "confidence": 0.9}]}, "body.votes[0].judge"),
    ({**PAIR, "votes": [{"judge": "e1", "choice": "A", "confidence": 1.5}]}, "body.votes[0].confidence"),
    ({**PAIR, "votes": [{"judge": "e1", "choice": "A", "confidence": -0.1}]}, "body.votes[0].confidence"),
    ({**PAIR, "votes": []}, "body.votes"),
    ({**PAIR, "votes": [{"judge": "e1", "choice": "A"}]}, "body.votes[0].confidence"),
    ({**PAIR, "votes": [{"judge": "e1", "choice": None, "confidence": 0.4}]}, "body.votes[0].confidence"),
    ({**PAIR, "votes": [*UNANIMOUS, {"judge": "e1", "choice": "B", "confidence": 0.9}]}, "body.votes[3].judge"),
    ({**PAIR, "votes": votes("A", None, None)}, "body.votes"),  # below the quorum of 2
    ({**PAIR, "panel": "nope", "votes": UNANIMOUS}, "body.panel"),
    ({**PAIR, "label": "C", "votes": UNANIMOUS}, "body.label"),
])
async def test_bad_fuse_bodies_are_422_naming_the_field_and_write_nothing(storage, tmp_path, body, field):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage) as (_app, client):
        r = await client.post("/v1/fuse", json={**body, "id": "bad-1"}, headers=H)
        assert r.status_code == 422, r.text
        assert field in [f["field"] for f in r.json()["fields"]], r.json()
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
    assert await storage.get_verdict("tenant-a", "bad-1") is None
    assert await storage.list_accumulators("tenant-a") == []
    assert all(s["routed"] == 0 for s in stats["strata"].values())
