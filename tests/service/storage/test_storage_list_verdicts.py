"""``Storage.list_verdicts``: the console's verdict list, on every backend. Each filter, and
paging through all of it by keyset with small pages and a small scan budget, gives exactly the
records a plain Python filter over everything saved gives, in (created_at, id) descending order."""

from __future__ import annotations

import random
from typing import Any

import pytest
from jf_test_support.storage_support import T0, incr

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, Letter, PairwiseItem
from judgefuse.service.storage import ReviewStamp, Storage, VerdictRecord
from judgefuse.service.storage.verdict_query import VerdictCursor, VerdictQuery

STRATA = ("review", "audit", "none", "inline")


def _record(i: int, rng: random.Random, *, panel: str = "p1", tenant: str = "acme") -> VerdictRecord:
    choice: Letter = rng.choice(["A", "B"])
    confidence = round(rng.uniform(0.5, 1.0), 3)
    other: Letter = rng.choice(["A", "B"])
    votes = [
        JudgeVote(judge="j1", mode="sc", choice=choice, confidence=confidence, latency_s=0.2),
        JudgeVote(judge="j2", mode="sc", choice=other, confidence=0.7),
    ]
    stratum = STRATA[i % 4]
    route = "human_review" if stratum == "review" or (stratum == "inline" and i % 8 == 3) else "auto_accept"
    verdict = Verdict(choice=choice, confidence=confidence,
                      p_a=confidence if choice == "A" else 1 - confidence, method="majority",
                      votes=votes, n_valid=2, id=f"v{i:03d}", route=route)
    stamp = ReviewStamp(stratum=stratum, inclusion_probability=0.5 if stratum == "audit" else 1.0,
                        reason="x", audit_rate=0.5, rank=rng.random(), route=route)
    # every third record shares its time with the one before: ties are ordered by id
    created = T0 + (i - i % 3 // 2) * 10.0
    return VerdictRecord(id=f"v{i:03d}", tenant=tenant, panel=panel, created_at=created,
                         verdict=verdict, review=stamp,
                         item=PairwiseItem(id=f"v{i:03d}", question="q", answer_a="a", answer_b="b"))


async def _seed(storage: Storage) -> list[VerdictRecord]:
    rng = random.Random(7)
    saved = []
    for i in range(60):
        record = _record(i, rng)
        await storage.save_verdict("acme", record)
        saved.append(record)
    for i in range(60, 70):  # another panel and another tenant, interleaved in time
        await storage.save_verdict("acme", _record(i, rng, panel="p2"))
        await storage.save_verdict("other", _record(i, rng, tenant="other"))
    labelled = {}
    for record in saved[::3]:
        letter: Letter = "A" if int(record.id[1:]) % 2 else "B"
        outcome = await storage.set_label("acme", record.id, letter, incr, labelled_at=T0 + 5000)
        labelled[record.id] = outcome.record
    return [labelled.get(r.id, r) for r in saved]


def _expected(records: list[VerdictRecord], f: dict[str, Any]) -> list[str]:
    out = []
    for r in records:
        votes = {v.choice for v in r.verdict.votes if v.choice}
        checks = [
            f.get("route") in (None, r.verdict.route),
            f.get("stratum") in (None, r.review.stratum if r.review else None),
            f.get("labelled") is None or f["labelled"] == (r.label is not None),
            not f.get("wrong") or (r.label is not None and r.label != r.verdict.choice),
            not f.get("disagreeing") or len(votes) > 1,
            f.get("below_confidence") is None or r.verdict.confidence < f["below_confidence"],
            f.get("since") is None or r.created_at >= f["since"],
            f.get("until") is None or r.created_at < f["until"],
        ]
        if all(checks):
            out.append(r)
    out.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    return [r.id for r in out]


async def _page_all(storage: Storage, query: VerdictQuery, *, limit: int, scan_limit: int) -> list[str]:
    ids: list[str] = []
    cursor = None
    for _ in range(200):
        page = await storage.list_verdicts("acme", query, after=cursor, limit=limit, scan_limit=scan_limit)
        assert len(page.records) <= limit and page.scanned <= scan_limit
        ids += [r.id for r in page.records]
        if page.next is None:
            return ids
        cursor = VerdictCursor.parse(page.next.token())  # through the URL form, as the console does
    raise AssertionError("paging did not end")


FILTERS: list[dict[str, Any]] = [
    {},
    {"route": "auto_accept"},
    {"route": "human_review"},
    {"stratum": "audit"},
    {"stratum": "inline", "route": "human_review"},
    {"labelled": True},
    {"labelled": False},
    {"wrong": True},
    {"disagreeing": True},
    {"below_confidence": 0.7},
    {"since": T0 + 100.0, "until": T0 + 400.0},
    {"labelled": False, "disagreeing": True, "below_confidence": 0.9, "since": T0 + 50.0},
    {"wrong": True, "stratum": "review"},
    {"route": "auto_accept", "stratum": "review"},  # nothing: review is never auto-accepted
]


async def test_filters_and_keyset_paging_match_a_plain_filter(storage: Storage) -> None:
    records = await _seed(storage)
    for filters in FILTERS:
        expected = _expected(records, filters)
        query = VerdictQuery(panel="p1", **filters)
        # one page holds all; then small pages; then small pages under a small scan budget
        whole = await storage.list_verdicts("acme", query, limit=100, scan_limit=1000)
        assert [r.id for r in whole.records] == expected and whole.next is None, filters
        assert await _page_all(storage, query, limit=7, scan_limit=1000) == expected, filters
        assert await _page_all(storage, query, limit=3, scan_limit=5) == expected, filters
        oldest = VerdictQuery(panel="p1", oldest_first=True, **filters)
        assert await _page_all(storage, oldest, limit=4, scan_limit=9) == expected[::-1], filters
    sizes = [len(_expected(records, f)) for f in FILTERS]
    assert sizes[0] == 60 and sizes[-1] == 0 and all(0 < n < 60 for n in sizes[1:-1])


async def test_pages_are_tenant_and_panel_scoped_and_carry_labels(storage: Storage) -> None:
    records = await _seed(storage)
    page = await storage.list_verdicts("other", VerdictQuery(panel="p1"), limit=50)
    assert {r.tenant for r in page.records} == {"other"} and len(page.records) == 10
    p2 = await storage.list_verdicts("acme", VerdictQuery(panel="p2"), limit=50)
    assert [r.id for r in p2.records] == [f"v{i:03d}" for i in range(69, 59, -1)]
    labelled = await storage.list_verdicts("acme", VerdictQuery(panel="p1", labelled=True), limit=50)
    assert all(r.label is not None for r in labelled.records) and len(labelled.records) == 20
    assert labelled.records[0] == next(r for r in records if r.id == labelled.records[0].id)
    empty = await storage.list_verdicts("acme", VerdictQuery(panel="nope"), limit=5)
    assert empty.records == [] and empty.next is None


async def test_a_verdict_saved_after_the_first_page_never_shifts_the_next(storage: Storage) -> None:
    await _seed(storage)
    query = VerdictQuery(panel="p1")
    first = await storage.list_verdicts("acme", query, limit=10)
    rng = random.Random(1)
    newer = _record(99, rng)
    await storage.save_verdict("acme", newer.model_copy(update={"created_at": T0 + 10_000}))
    second = await storage.list_verdicts("acme", query, after=first.next, limit=10)
    assert first.next is not None
    assert (second.records[0].created_at, second.records[0].id) < (first.next.created_at, first.next.id)
    assert not {r.id for r in first.records} & {r.id for r in second.records}


def test_bad_arguments_and_cursor_tokens() -> None:
    with pytest.raises(ValueError, match="cursor"):
        VerdictCursor.parse("nonsense")
    with pytest.raises(ValueError, match="number"):
        VerdictCursor.parse("abc~v1")
    cursor = VerdictCursor(created_at=T0 + 0.1 + 0.2, id="a~b")
    assert VerdictCursor.parse(cursor.token()) == cursor  # exact float, '~' inside an id kept
