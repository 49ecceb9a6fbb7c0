"""GET /v1/panels/{panel}/plan over real HTTP (uvicorn, the Python client, a SQLite file): audit
labels a day for a target width from the panel's stored traffic. Two days of stored traffic
(review, audited and unaudited auto-accepted verdicts; audit labels, one tie label, unsolicited
labels that must stay out, traffic older than the window) plus verdicts posted over HTTP; the
answer must be the plan of exactly those rows, its precision the audit labels' by hand, and too
little traffic an answer that says so, not numbers. Bad query parameters are 422s naming them."""

from __future__ import annotations

import asyncio
import math
import time

import httpx
import numpy as np
import pytest
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, UNANIMOUS, external_panel, put_threshold

from judgefuse.calibration.width_plan import plan_from_traffic
from judgefuse.client import AsyncClient, Client, InvalidRequest
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.app import create_app
from judgefuse.service.storage import ReviewStamp, SQLiteStorage, VerdictRecord

DAY = 86400.0


def _sync_plan(url: str) -> object:
    with Client(url, api_key=S.TENANT_KEYS["tenant-a"]) as client:
        return client.plan("ext", width=0.04, window_days=14)


def _record(i: int, created_at: float, rng: np.random.Generator) -> tuple[VerdictRecord, str | None]:
    """One stored verdict of panel ``ext`` and the label it gets (None: none). A quarter go to
    review; of the auto-accepted, one in five is audited."""
    auto = i % 4 != 0
    confidence = float(rng.uniform(0.9, 1.0) if auto else rng.uniform(0.5, 0.85))
    choice = "A" if i % 3 else "B"
    stratum = "review" if not auto else ("audit" if i % 5 == 1 else "none")
    stamp = ReviewStamp(
        stratum=stratum,
        inclusion_probability={"review": 1.0, "audit": 0.2, "none": 0.0}[stratum],
        reason={"review": "below_threshold", "audit": "audit", "none": "auto_accept"}[stratum],
        audit_rate=0.2,
        draw=None if stratum == "review" else 0.1 if stratum == "audit" else 0.7,
        rank=float(rng.uniform()),
        route="auto_accept" if auto else "human_review",
    )
    votes = [JudgeVote(judge=j, mode="recorded", choice=choice, confidence=confidence) for j in ("e1", "e2", "e3")]
    verdict = Verdict(
        choice=choice,
        confidence=confidence,
        p_a=confidence if choice == "A" else 1.0 - confidence,
        method="majority",
        votes=votes,
        n_valid=3,
        n_invalid=0,
        id=f"s{i}",
        route="auto_accept" if auto else "human_review",
        threshold=0.9,
    )
    record = VerdictRecord(
        id=f"s{i}", tenant="tenant-a", panel="ext", created_at=created_at, verdict=verdict, review=stamp
    )
    other = "B" if choice == "A" else "A"
    right = rng.uniform() < confidence
    label = None
    if stratum == "audit":
        label = "tie" if i == 11 else (choice if right else other)
    elif stratum == "review" and i % 8 == 0:
        label = choice if right else other
    elif stratum == "none" and i % 7 == 0:  # unsolicited: a wrong label on purpose, to be left out
        label = other
    return record, label


async def test_the_plan_is_read_from_the_panels_stored_traffic(tmp_path):
    db = SQLiteStorage(tmp_path / "db.sqlite3")
    await db.open()
    await put_threshold(db)
    rng = np.random.default_rng(5)
    now = time.time()
    rows = []  # (created_at, auto, confidence, correct or NaN), within the default 168 hours
    audit_right = []
    unsolicited = 0
    for i in range(240):
        at = now - 2 * DAY + i * (2 * DAY - 3600.0) / 239 if i >= 10 else now - 10 * DAY + i
        record, label = _record(i, at, rng)
        await db.save_verdict("tenant-a", record)
        if label is not None:
            await db.set_label("tenant-a", record.id, label, lambda _r, _l: {})
        auto = record.verdict.route == "auto_accept"
        correct = math.nan
        if auto and record.review.stratum == "audit" and label in ("A", "B"):
            correct = float(label == record.verdict.choice)
            if i >= 10:
                audit_right.append(correct)
        unsolicited += auto and record.review.stratum == "none" and label is not None and i >= 10
        if i >= 10:
            rows.append((at, auto, record.verdict.confidence, correct))
    assert unsolicited > 0 and len(audit_right) >= 10

    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=0.0)])
    app = create_app(settings, storage=db, environ={})
    try:
        async with (
            S.uvicorn_server(app) as url,
            AsyncClient(url, api_key=S.TENANT_KEYS["tenant-a"]) as client,
            httpx.AsyncClient(base_url=url) as raw,  # the 422 bodies as sent
        ):
            for i in range(3):  # fresh verdicts over HTTP: auto-accepted at threshold 0.9, not audited
                posted = await client.fuse(**PAIR, id=f"h{i}", panel="ext", votes=UNANIMOUS)
                assert posted.route == "auto_accept"
                rows.append((time.time(), True, posted.confidence, math.nan))
            got = await client.plan("ext", width=0.04, window_days=14)
            every = await client.plan("ext", width=0.04, window_days=14, traffic_hours=0)
            recent = await client.plan("ext", traffic_hours=1)
            # the sync client, in a thread, answers the same
            sync = await asyncio.to_thread(_sync_plan, url)
            with pytest.raises(InvalidRequest) as bad_width:
                await client.plan("ext", width=1.5)
            bad = {
                f"{name}={value}": await raw.get(
                    "/v1/panels/ext/plan", params={name: value}, headers=S.auth("tenant-a")
                )
                for name, value in (
                    ("width", "0"),
                    ("width", "nan"),
                    ("width", "-0.1"),
                    ("window_days", "inf"),
                    ("window_days", "0"),
                    ("traffic_hours", "-1"),
                    ("traffic_hours", "1e9"),
                )
            }
            unknown = await raw.get("/v1/panels/nope/plan", headers=S.auth("tenant-a"))
            anonymous = await raw.get("/v1/panels/ext/plan")
    finally:
        await db.close()

    t, auto, c, y = (np.array(col) for col in zip(*rows, strict=True))
    want = plan_from_traffic(t, auto.astype(bool), c, y, width=0.04, days=14)
    assert got.plan is not None and got.not_enough_traffic is None
    assert (got.panel, got.width, got.window_days, got.traffic_hours) == ("ext", 0.04, 14.0, 168)
    assert got.n_verdicts == len(rows) and got.n_auto == int(auto.sum())
    # the precision is that of the audit labels: not the tie label, not the unsolicited ones
    assert got.plan.precision_basis == f"{len(audit_right)} audit labels"
    assert got.plan.precision == pytest.approx(np.mean(audit_right))
    assert got.plan.traffic_days == pytest.approx(want.traffic_days, rel=1e-4)
    assert got.plan.auto_per_day == pytest.approx(want.auto_per_day, rel=1e-4)
    assert got.plan.review_per_day == pytest.approx(want.review_per_day, rel=1e-4)
    assert got.plan.sd_active == pytest.approx(want.sd_active) and got.plan.sd_uniform == pytest.approx(want.sd_uniform)
    assert set(got.plan.rates) == {"precision/uniform", "precision/active", "accuracy/uniform", "accuracy/active"}
    for key, rate in want.rates.items():
        assert got.plan.rates[key] == pytest.approx(rate, rel=1e-4)
        assert got.plan.labels_per_day[key] == pytest.approx(rate * want.auto_per_day, rel=1e-3)
    assert got.plan.rates["accuracy/uniform"] < got.plan.rates["precision/uniform"]  # review is a census
    assert sync.model_dump() == got.model_dump()
    # all stored traffic: the ten old verdicts join, and ten days of span lower the volumes a day
    assert every.traffic_hours is None and every.n_verdicts == got.n_verdicts + 10
    assert every.plan is not None and every.plan.traffic_days > 9.0
    assert every.plan.auto_per_day < got.plan.auto_per_day
    # the last hour holds the three posted verdicts: too little to plan from, and said so
    assert recent.plan is None and recent.n_verdicts == 3
    assert recent.not_enough_traffic is not None and "not enough traffic yet" in recent.not_enough_traffic
    assert "3 auto-accepted" in recent.not_enough_traffic
    assert bad_width.value.status == 422
    assert [f.field for f in bad_width.value.body.fields] == ["query.width"]
    for case, response in bad.items():
        assert response.status_code == 422, (case, response.text)
        assert [f["field"] for f in response.json()["fields"]] == [f"query.{case.split('=')[0]}"], case
    assert unknown.status_code == 422 and [f["field"] for f in unknown.json()["fields"]] == ["path.panel"]
    assert anonymous.status_code == 401
