"""What ``POST /v1/fuse`` accepts (docs/gateway.md, 'Bring your own votes'): a p_a that agrees
with its vote's choice and confidence, votes for ``external: true`` judges only, JSON numbers
only, one set of votes per id (a replay with others is a 409, in flight or stored), and a batch
that answers per item for schema errors too. Each was accepted before, and each 4xx names the
field and stores nothing."""

from __future__ import annotations

import asyncio
import textwrap

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, UNANIMOUS, H, external_panel, votes


def mixed_panel(tmp_path):
    """One external judge and one model judge (never called here)."""
    path = tmp_path / "panel-mixed.yaml"
    path.write_text(textwrap.dedent("""\
        name: mixed
        fusion: mean_probability
        quorum: 1
        judges:
          - {name: e1, external: true}
          - {name: m1, model: openai/m1, backend: direct, api_base: "http://127.0.0.1:9/v1"}
        """), encoding="utf-8")
    return path


async def _nothing_stored(client, storage=None):
    stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
    assert all(s["routed"] == 0 for s in stats["strata"].values()), stats


@pytest.mark.parametrize(("vote", "problem"), [
    ({"judge": "e1", "choice": "A", "confidence": 0.95, "p_a": 0.05}, "contradicts choice A"),
    ({"judge": "e1", "choice": "B", "confidence": 0.8, "p_a": 0.8}, "must be 0.2"),
    ({"judge": "e1", "choice": "A", "confidence": 0.9, "p_a": 0.6}, "must be 0.9"),
    ({"judge": "e1", "confidence": 0.9, "p_a": 0.2}, "has confidence 0.8"),
])
async def test_a_p_a_that_contradicts_its_choice_or_confidence_is_422(tmp_path, vote, problem):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        body = {**PAIR, "votes": [vote, *votes(None, "A", "A")[1:]]}
        r = await client.post("/v1/fuse", json=body, headers=H)
        assert r.status_code == 422, r.text
        [field] = r.json()["fields"]
        assert field["field"] == "body.votes[0].p_a" and problem in field["problem"], field
        await _nothing_stored(client)


async def test_a_p_a_that_agrees_is_kept_and_mean_probability_follows_the_choices(tmp_path):
    settings = S.make_settings(tmp_path, [mixed_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        for vote in ({"judge": "e1", "choice": "A", "confidence": 0.95, "p_a": 0.95},
                     {"judge": "e1", "choice": "B", "confidence": 0.7, "p_a": 0.3 + 1e-9},
                     {"judge": "e1", "confidence": 0.7, "p_a": 0.3}):
            r = await client.post("/v1/fuse", json={**PAIR, "panel": "mixed", "votes": [vote]}, headers=H)
            assert r.status_code == 200, r.text
            expected = vote.get("choice", "B")
            assert r.json()["choice"] == expected and r.json()["votes"][0]["choice"] == expected


async def test_votes_for_the_panels_model_judges_are_422_naming_the_judge(tmp_path):
    settings = S.make_settings(tmp_path, [mixed_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/fuse", json={**PAIR, "panel": "mixed", "id": "m-1", "votes": [
            {"judge": "e1", "choice": "A", "confidence": 0.9},
            {"judge": "m1", "choice": "B", "confidence": 0.9}]}, headers=H)
        assert r.status_code == 422, r.text
        [field] = r.json()["fields"]
        assert field["field"] == "body.votes[1].judge"
        assert "model judge" in field["problem"] and "external: true" in field["problem"]
        assert (await client.get("/v1/verdicts/m-1", headers=H)).status_code == 404
        unknown = await client.post("/v1/fuse", json={**PAIR, "panel": "mixed", "votes": [
            {"judge": "zz", "choice": "A", "confidence": 0.9}]}, headers=H)
        assert unknown.status_code == 422 and "takes posted votes for: e1" in unknown.text
        ok = await client.post("/v1/fuse", json={**PAIR, "panel": "mixed", "votes": [
            {"judge": "e1", "choice": "A", "confidence": 0.9}]}, headers=H)
        assert ok.status_code == 200, ok.text
        assert [v["judge"] for v in ok.json()["votes"]] == ["e1", "m1"]
        assert ok.json()["failed_judges"] == [{"judge": "m1", "reason": "no vote posted for this judge"}]


@pytest.mark.parametrize(("key", "value"), [
    ("confidence", "0.9"), ("confidence", True), ("p_a", "0.9"), ("p_a", False),
    ("signals", {"margin": "1.5"}), ("signals", {"margin": True}),
])
async def test_numbers_must_be_json_numbers(tmp_path, key, value):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        vote = {"judge": "e1", "choice": "A", "confidence": 0.9, key: value}
        if key == "p_a":
            vote = {"judge": "e1", "p_a": value}
        r = await client.post("/v1/fuse", json={**PAIR, "votes": [vote, *UNANIMOUS[1:]]}, headers=H)
        assert r.status_code == 422, r.text
        fields = [f["field"] for f in r.json()["fields"]]
        assert any(f.startswith(f"body.votes[0].{key}") for f in fields), fields
        await _nothing_stored(client)
        integer = {"judge": "e1", "choice": "A", "confidence": 1}  # an integer is a number
        assert (await client.post("/v1/fuse", json={**PAIR, "votes": [integer, *UNANIMOUS[1:]]},
                                  headers=H)).status_code == 200


async def test_a_replayed_id_with_other_votes_is_409_and_with_the_same_votes_the_stored_verdict(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        first = await client.post("/v1/fuse", json={**PAIR, "id": "r-1", "votes": UNANIMOUS}, headers=H)
        assert first.status_code == 200
        same = await client.post("/v1/fuse", json={**PAIR, "id": "r-1", "votes": UNANIMOUS}, headers=H)
        assert same.status_code == 200
        keys = ("id", "choice", "confidence", "p_a", "votes", "created_at", "review")
        assert {k: same.json()[k] for k in keys} == {k: first.json()[k] for k in keys}
        other = await client.post("/v1/fuse", json={**PAIR, "id": "r-1", "votes": votes("B", "B", "B")},
                                  headers=H)
        assert other.status_code == 409, other.text
        assert other.json()["fields"] == [{"field": "body.votes",
                                           "problem": "differ from the votes stored under this id"}]
        assert (await client.get("/v1/verdicts/r-1", headers=H)).json()["choice"] == "A"
        # two requests with one id in flight at once: the second's votes differ, so it does not
        # join the first (it would have got a verdict of votes it never sent)
        bodies = [{**PAIR, "id": "r-2", "votes": UNANIMOUS}, {**PAIR, "id": "r-2", "votes": votes("B", "B", "B")}]
        answers = await asyncio.gather(*(client.post("/v1/fuse", json=b, headers=H) for b in bodies))
        assert sorted(a.status_code for a in answers) == [200, 409], [a.text for a in answers]


async def test_a_fuse_batch_answers_a_schema_error_in_its_item(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings) as (_app, client):
        bad = {**PAIR, "votes": [{"judge": "e1", "choice": "A", "confidence": "0.9"}, *UNANIMOUS[1:]]}
        extra = {**PAIR, "votes": UNANIMOUS, "surprise": 1}
        r = await client.post("/v1/fuse/batch", json={"items": [
            {**PAIR, "votes": UNANIMOUS}, bad, extra, {**PAIR, "votes": UNANIMOUS}]}, headers=H)
        assert r.status_code == 200, r.text
        results = r.json()["results"]
        assert [x["status"] for x in results] == [200, 422, 422, 200]
        assert results[1]["error"]["fields"][0]["field"] == "body.items[1].votes[0].confidence"
        assert results[2]["error"]["fields"][0]["field"] == "body.items[2].surprise"
        assert r.json()["n_ok"] == 2 and r.json()["n_failed"] == 2
