"""The verdict list's query string: every filter parsed into the storage query, bad values
refused naming the field, and the links (next page, presets) keeping the filters."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest

from judgefuse.service.console.verdict_list import ListParams, parse_time, show_time
from judgefuse.service.errors import FieldProblem
from judgefuse.service.storage.verdict_query import VerdictCursor


def test_every_filter_reaches_the_query() -> None:
    params = ListParams("p", {"route": "human_review", "stratum": "audit", "labelled": "0", "wrong": "1",
                              "disagreeing": "on", "below": "0.7", "since": "2026-11-26T08:00",
                              "until": "1790000000", "limit": "25", "after": "12.5~v1"})
    q = params.query
    assert (q.panel, q.route, q.stratum, q.labelled, q.wrong, q.disagreeing) == (
        "p", "human_review", "audit", False, True, True)
    assert q.below_confidence == 0.7 and q.until == 1790000000.0
    assert q.since == parse_time("since", "2026-11-26T08:00") and show_time(q.since) == "2026-11-26T08:00"
    assert params.after == VerdictCursor(created_at=12.5, id="v1") and params.limit == 25
    assert not q.indexed_only and q.index_labelled is True  # wrong implies labelled
    assert ListParams("p", {"labelled": "1", "since": "5"}).query.indexed_only
    assert ListParams("p", {"order": "oldest"}).query.oldest_first
    assert not ListParams("p", {}).query.oldest_first


@pytest.mark.parametrize(("params", "field"), [
    ({"route": "sideways"}, "query.route"),
    ({"stratum": "vip"}, "query.stratum"),
    ({"labelled": "maybe"}, "query.labelled"),
    ({"below": "high"}, "query.below"),
    ({"below": "1.5"}, "query.below"),
    ({"since": "yesterday"}, "query.since"),
    ({"since": "nan"}, "query.since"),
    ({"until": "1e20"}, "query.until"),
    ({"since": "1900-01-01"}, "query.since"),
    ({"after": "inf~v1"}, "query.after"),
    ({"after": "no-tilde"}, "query.after"),
    ({"limit": "1000"}, "query.limit"),
    ({"order": "random"}, "query.order"),
])
def test_bad_values_name_their_field(params: dict[str, str], field: str) -> None:
    with pytest.raises(FieldProblem) as caught:
        ListParams("p", params)
    assert caught.value.fields[0][0] == field


def test_links_keep_the_filters_and_move_the_cursor() -> None:
    params = ListParams("my panel", {"wrong": "1", "limit": "100", "after": "1.0~a"})
    link = params.link(after=VerdictCursor(created_at=2.0, id="b").token())
    query = parse_qs(urlparse(link).query)
    assert query == {"panel": ["my panel"], "wrong": ["1"], "limit": ["100"], "after": ["2.0~b"]}
    assert "after" not in parse_qs(urlparse(params.link(after=None)).query)


async def test_the_queue_age_is_the_oldest_unlabelled_queued_verdict(tmp_path) -> None:
    from jf_test_support.storage_support import T0, incr, make_record

    from judgefuse.service.console.overview import age_text, oldest_waiting
    from judgefuse.service.storage import ReviewStamp, SQLiteStorage

    storage = SQLiteStorage(tmp_path / "age.sqlite3")
    await storage.open()
    try:
        assert await oldest_waiting(storage, "acme", "p1") == (None, True)
        for vid, stratum, dt in [("old", "none", 0.0), ("r1", "review", 100.0), ("a1", "audit", 200.0),
                                 ("r2", "review", 300.0)]:
            stamp = ReviewStamp(stratum=stratum, inclusion_probability=1.0, reason="x")
            await storage.save_verdict("acme", make_record(vid, created_at=T0 + dt).model_copy(update={"review": stamp}))
        assert await oldest_waiting(storage, "acme", "p1") == (T0 + 100.0, True)
        await storage.set_label("acme", "r1", "A", incr)
        assert await oldest_waiting(storage, "acme", "p1") == (T0 + 200.0, True)
    finally:
        await storage.close()
    assert (age_text(59), age_text(3 * 3600 + 120), age_text(3 * 86400 + 7200)) == ("0 min", "3 h 2 min", "3 d 2 h")
