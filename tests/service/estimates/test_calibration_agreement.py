"""Tie votes and agreement with the labels in ``GET /v1/calibration``, over real HTTP on every
storage backend: a judge's tie vote is counted as a tie (not an abstention, not in any
calibration key), each judge and method carries the 2x2 confusion matrix of its A/B answers
against the A/B labels with Cohen's kappa (checked against scikit-learn on the same pairs), and
ties and missing answers per label beside it; relabels, undos and tie labels move the counts
like every accumulator, and a counter written before them reads as zero."""

from __future__ import annotations

import re

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import EXT, PAIR, H, external_panel
from sklearn.metrics import cohen_kappa_score

from judgefuse.service.app import create_app
from judgefuse.service.ledger import label_increments

TIE = "tie"


def _vote(judge: str, answer: str | None) -> dict:
    if answer == TIE:
        return {"judge": judge, "p_a": 0.5}
    return {"judge": judge, "choice": answer, "confidence": None if answer is None else 0.8}


# per verdict: what e1, e2, e3 answer (None: an abstention), and the label it gets
CASES = [
    (("A", "A", TIE), "A"),
    (("B", "A", "B"), "B"),
    (("A", "B", None), "B"),  # majority ties 1-1: a fused tie
    (("B", "B", "A"), "B"),
    (("A", "B", "A"), "A"),
    (("A", "A", "A"), "B"),
    (("B", TIE, "B"), "A"),
    (("A", "B", TIE), "B"),
]


def _entry(cal: dict, kind: str, name: str) -> dict:
    return next(e for e in cal["keys"] if e["kind"] == kind and e["name"] == name)


def _expected(answers: list[str], labels: list[str]) -> dict:
    """The agreement block recomputed from (answer, label) pairs, kappa by scikit-learn."""
    decided = [(a, lab) for a, lab in zip(answers, labels, strict=True) if a in ("A", "B")]
    counts = [[sum(1 for a, lab in decided if (lab, a) == (row, col)) for col in "AB"] for row in "AB"]
    return {
        "n": len(decided),
        "cohen_kappa": float(cohen_kappa_score([lab for _a, lab in decided], [a for a, _l in decided])),
        "confusion": {"labels": ["A", "B"], "answers": ["A", "B"], "counts": counts},
        "ties": {row: sum(1 for a, lab in zip(answers, labels, strict=True) if (a, lab) == (TIE, row))
                 for row in "AB"},
        "no_answer": {row: sum(1 for a, lab in zip(answers, labels, strict=True) if (a, lab) == ("none", row))
                      for row in "AB"},
    }


def _check(cal: dict, kind: str, name: str, answers: list[str], labels: list[str]) -> None:
    entry = _entry(cal, kind, name)
    want = _expected(answers, labels)
    got = dict(entry["agreement"]["all_time"])
    assert abs(got.pop("cohen_kappa") - want.pop("cohen_kappa")) < 1e-12, (name, entry["agreement"])
    assert got == want, (name, got, want)
    assert entry["agreement"]["window"] == entry["agreement"]["all_time"]  # all within the 24 h window
    assert entry["ties"] == {"all_time": sum(want["ties"].values()), "window": sum(want["ties"].values())}
    assert entry["abstained"]["all_time"] == sum(want["no_answer"].values())


async def test_tie_votes_and_agreement_with_the_labels(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        answers: dict[str, list[str]] = {j: [] for j in EXT}
        answers["majority"] = []
        ids = []
        fused: list[tuple[str, str | None, float]] = []
        for i, (votes, label) in enumerate(CASES):
            r = await client.post("/v1/fuse", json={
                **PAIR, "id": f"ag{i}", "votes": [_vote(j, a) for j, a in zip(EXT, votes, strict=True)]},
                headers=H)
            assert r.status_code == 200, r.text
            out = r.json()
            # a tie vote says so: not only choice null, error null, p_a 0.5
            assert [v["tie"] for v in out["votes"]] == [a == TIE for a in votes]
            assert all(v["error"] is None for v, a in zip(out["votes"], votes, strict=True) if a == TIE)
            for judge, a in zip(EXT, votes, strict=True):
                answers[judge].append("none" if a is None else a)
            fused_tie = out["choice"] is None and any(n.startswith("exact tie") for n in out["notes"])
            answers["majority"].append(out["choice"] or (TIE if fused_tie else "none"))
            ids.append(out["id"])
            fused.append((out["id"], out["choice"], out["confidence"]))
            r = await client.post("/v1/feedback", json={"verdict_id": out["id"], "label": label}, headers=H)
            assert r.status_code == 200, r.text
        labels = [label for _votes, label in CASES]
        assert answers["majority"][2] == TIE  # the 1-1 split is a fused tie, not an abstention
        stored = (await client.get(f"/v1/verdicts/{ids[0]}", headers=H)).json()
        assert [v["tie"] for v in stored["votes"]] == [False, False, True]

        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        for judge in EXT:
            _check(cal, "judge", judge, answers[judge], labels)
        # the most confident disagreements with the labels: fused A/B answers the label
        # contradicts, most confident first (equal confidences: the newer first)
        missed = [(vid, choice, conf, lab) for (vid, choice, conf), lab in zip(fused, labels, strict=True)
                  if choice in ("A", "B") and choice != lab]
        assert missed, "the cases must hold a disagreement"
        missed.sort(key=lambda m: -m[2])
        got = cal["disagreements"]
        assert got["scanned"] == len(CASES)
        assert ({(d["id"], d["choice"], d["confidence"], d["label"]) for d in got["items"]}
                == set(missed))
        assert all(d["method"] == "majority" for d in got["items"])
        assert [d["confidence"] for d in got["items"]] == sorted((m[2] for m in missed), reverse=True)
        one = (await client.get("/v1/calibration", params={"panel": "ext", "disagreements": 1},
                                headers=H)).json()["disagreements"]["items"]
        assert len(one) == 1 and one[0]["confidence"] == max(m[2] for m in missed)
        off = (await client.get("/v1/calibration", params={"panel": "ext", "disagreements": 0},
                                headers=H)).json()
        assert off["disagreements"] is None
        _check(cal, "method", "majority", answers["majority"], labels)
        e3 = _entry(cal, "judge", "e3")
        assert e3["ties"]["all_time"] == 2 and e3["abstained"]["all_time"] == 1
        # a tie vote is in no calibration metric: e3's A/B votes only
        assert e3["all_time"]["n"] == 5
        assert _entry(cal, "mode", "all")["agreement"] is None
        assert _entry(cal, "mode", "all")["ties"] is None
        html = (await client.get("/console/calibration", headers=H)).text
        assert "<th>ties</th><th>kappa</th>" in html
        e1_kappa = _entry(cal, "judge", "e1")["agreement"]["all_time"]["cohen_kappa"]
        assert f"<td>{e1_kappa:.3f}</td>" in html
        no_window = (await client.get("/v1/calibration", params={"panel": "ext", "window_hours": 0},
                                      headers=H)).json()
        assert _entry(no_window, "judge", "e1")["agreement"]["window"] is None

        # a relabel moves every count (A -> B on the first verdict); a tie label takes it out
        r = await client.post("/v1/feedback", json={"verdict_id": ids[0], "label": "B"}, headers=H)
        assert r.json()["status"] == "relabelled"
        labels[0] = "B"
        r = await client.post("/v1/feedback", json={"verdict_id": ids[1], "label": TIE}, headers=H)
        assert r.json()["status"] == "relabelled"
        kept = [i for i in range(len(CASES)) if i != 1]
        # undo of the last label, by storage's own undo (what the review page calls)
        record = await storage.get_verdict("tenant-a", ids[7])
        assert await storage.undo_label("tenant-a", ids[7], label_increments,
                                        labelled_at=record.labelled_at, annotator="ann", lease_s=60)
        kept.remove(7)
        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
        for name, kind in ((*[(j, "judge") for j in EXT], ("majority", "method"))):
            _check(cal, kind, name, [answers[name][i] for i in kept], [labels[i] for i in kept])
        assert _entry(cal, "judge", "e3")["ties"]["all_time"] == 1  # the undone verdict's tie is gone


async def test_a_counter_from_before_the_agreement_fields_reads_as_zero(storage, tmp_path):
    """A label stored by the older ledger (no agreement counter; a tie vote then counted as an
    abstention) gives zero ties and an empty agreement block, with the metrics as before."""

    def older_ledger(record, label):
        return {key: fields for key, fields in label_increments(record, label).items()
                if "/agreement/" not in key}

    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/v1/fuse", json={**PAIR, "id": "old", "votes": [
            _vote("e1", "A"), _vote("e2", "B"), _vote("e3", "A")]}, headers=H)
        assert r.status_code == 200, r.text
        await storage.set_label("tenant-a", "old", "A", older_ledger)
        cal = (await client.get("/v1/calibration", params={"panel": "ext"}, headers=H)).json()
    e1 = _entry(cal, "judge", "e1")
    assert e1["all_time"]["n"] == 1 and e1["all_time"]["accuracy"] == 1.0
    assert e1["ties"] == {"all_time": 0, "window": 0}
    block = e1["agreement"]["all_time"]
    assert (block["n"], block["cohen_kappa"], block["confusion"]["counts"]) == (0, None, [[0, 0], [0, 0]])


async def test_the_console_shows_a_tie_vote_as_a_tie_not_a_failure(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        for vid, votes in (("c0", ("A", "B", TIE)), ("c1", ("A", "A", None)), ("c2", ("B", "B", TIE))):
            r = await client.post("/v1/fuse", json={
                **PAIR, "id": vid, "votes": [_vote(j, a) for j, a in zip(EXT, votes, strict=True)]},
                headers=H)
            assert r.status_code == 200, r.text
        overview = (await client.get("/console", headers=H)).text
        page = (await client.get("/console/verdicts/c0", headers=H)).text
        metrics = (await client.get("/metrics", headers=S.admin())).text
        dashboard = (await client.get("/console/calibration", headers=H)).text
    # /metrics: a tie vote is its own outcome, not an invalid vote or a judge error
    series = dict(re.findall(r'^(judgefuse_judge_(?:votes|errors)_total\{[^}]*judge="e3"[^}]*\}) (\S+)$',
                             metrics, re.M))
    assert float(series['judgefuse_judge_votes_total{judge="e3",outcome="tie",panel="ext"}']) == 2
    assert float(series['judgefuse_judge_votes_total{judge="e3",outcome="invalid",panel="ext"}']) == 1
    assert float(series['judgefuse_judge_errors_total{judge="e3",panel="ext"}']) == 1
    assert "<td>e3</td><td>0</td><td>1</td><td>2</td>" in dashboard  # valid, invalid, tie votes
    row = re.search(r'<tr data-judge="e3">(.*?)</tr>', overview, re.S)
    assert row, "no row for e3"
    cells = dict(re.findall(r'<td class="(failed|ties)">(\d+)</td>', row.group(1)))
    assert cells == {"failed": "1", "ties": "2"}
    e3 = re.search(r'<tr data-judge="e3">(.*?)</tr>', page, re.S)
    assert e3 and '<span class="tie">tie</span>' in e3.group(1) and "failed" not in e3.group(1)


async def test_the_review_page_says_a_fused_tie_is_a_tie(storage, tmp_path):
    """With ``review_shows_verdict``, a fused exact tie reads as a tie (``verdict.tie``), not as
    "the judges chose neither", the words of a verdict without any usable vote."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, shows_verdict=True)])
    app = create_app(settings, storage=storage)
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
        r = await client.post("/v1/fuse", json={**PAIR, "id": "t0", "votes": [
            _vote("e1", "A"), _vote("e2", "B"), _vote("e3", TIE)]}, headers=H)
        assert r.status_code == 200 and r.json()["choice"] is None, r.text
        items = (await client.get("/v1/review/next", params={"panel": "ext", "annotator": "ann"},
                                  headers=H)).json()["items"]
        assert [(i["verdict_id"], i["verdict"]["tie"]) for i in items] == [("t0", True)]
        login = await client.post("/review/login", data={"api_key": S.TENANT_KEYS["tenant-a"],
                                                         "annotator": "ann"})
        assert login.status_code == 303, login.text
        page = (await client.get("/review")).text
    assert "the judges found the answers equal (an exact tie)" in page
    assert "chose neither" not in page
