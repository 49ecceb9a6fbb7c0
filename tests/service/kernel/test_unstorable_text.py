"""Text PostgreSQL cannot store (NUL, ``\\u0000``) and text no backend can (a lone surrogate)
is refused at the boundary on every backend alike (:mod:`judgefuse.service.kernel.stored_text`):
a 422 naming the field for new text, a 404 for an id naming a stored verdict. Before, NUL in an
id or an annotator name was stored on SQLite and Redis and a 500 on PostgreSQL."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, SPLIT, UNANIMOUS, H, external_panel, put_threshold

from judgefuse.service.kernel.stored_text import encodable, unstorable_problem

NUL = "a\x00b"


def test_encodable_refuses_nul_and_lone_surrogates_only():
    assert encodable("plain, \u00e9, \U0001f600, \x01 and \x7f")
    assert not encodable(NUL) and "NUL" in unstorable_problem(NUL)
    assert not encodable("\ud800") and "surrogate" in unstorable_problem("\ud800")


def _vote0(**extra):
    return [{**UNANIMOUS[0], **extra}, *UNANIMOUS[1:]]


@pytest.mark.parametrize(("body", "field"), [
    ({**PAIR, "id": NUL, "votes": UNANIMOUS}, "body.id"),
    ({**PAIR, "question": f"Which? {NUL}", "votes": UNANIMOUS}, "body.question"),
    ({**PAIR, "answer_b": NUL, "votes": UNANIMOUS}, "body.answer_b"),
    ({**PAIR, "category": NUL, "votes": UNANIMOUS}, "body.category"),
    ({**PAIR, "votes": _vote0(explanation=NUL)}, "body.votes[0].explanation"),
    ({**PAIR, "votes": _vote0(signals={NUL: 1.0})}, "body.votes[0].signals"),
])
async def test_nul_in_posted_text_is_422_naming_the_field_on_every_backend(storage, tmp_path, body, field):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    async with S.running_app(settings, storage) as (_app, client):
        r = await client.post("/v1/fuse", json=body, headers=H)
        assert r.status_code == 422, r.text
        [problem] = r.json()["fields"]
        assert problem["field"] == field and "NUL" in problem["problem"], problem
        batch = await client.post("/v1/fuse/batch", json={"items": [{**PAIR, "votes": UNANIMOUS}, body]},
                                  headers=H)
        assert [x["status"] for x in batch.json()["results"]] == [200, 422], batch.text
        assert batch.json()["results"][1]["error"]["fields"][0]["field"] == field.replace(
            "body.", "body.items[1].")


async def test_nul_in_ids_and_annotator_names_is_404_or_422_on_every_backend(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    await put_threshold(storage, 0.9)  # a split vote goes to review: the queue has an item
    async with S.running_app(settings, storage) as (_app, client):
        judged = await client.post("/v1/judge", json={**PAIR, "id": NUL}, headers=H)
        assert judged.status_code == 422 and judged.json()["fields"][0]["field"] == "body.id"
        stored = await client.post("/v1/fuse", json={**PAIR, "id": "ok-1", "votes": SPLIT},
                                   headers=H)
        assert stored.status_code == 200 and stored.json()["review"]["queued"], stored.text
        assert (await client.get("/v1/verdicts/ok%00-1", headers=H)).status_code == 404
        feedback = await client.post("/v1/feedback", json={"verdict_id": "ok-1\x00", "label": "A"},
                                     headers=H)
        assert feedback.status_code == 404, feedback.text
        leased = await client.get("/v1/review/next", params={"panel": "ext", "annotator": NUL}, headers=H)
        assert leased.status_code == 422 and leased.json()["fields"][0]["field"] == "query.annotator"
        skipped = await client.post("/v1/review/skip", json={"verdict_id": "ok-1", "annotator": NUL},
                                    headers=H)
        assert skipped.status_code == 422 and skipped.json()["fields"][0]["field"] == "body.annotator"
        skipped = await client.post("/v1/review/skip", json={"verdict_id": "ok\x00", "annotator": "ann"},
                                    headers=H)
        assert skipped.status_code == 404, skipped.text
        # the store answers as usual afterwards
        assert (await client.get("/v1/verdicts/ok-1", headers=H)).status_code == 200
        assert (await client.post("/v1/feedback", json={"verdict_id": "ok-1", "label": "A"},
                                  headers=H)).status_code == 200
