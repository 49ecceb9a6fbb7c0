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


@pytest.mark.parametrize(("params", "field"), [
    ({"route": "sideways"}, "query.route"),
    ({"stratum": "vip"}, "query.stratum"),
    ({"labelled": "maybe"}, "query.labelled"),
    ({"below": "high"}, "query.below"),
    ({"below": "1.5"}, "query.below"),
    ({"since": "yesterday"}, "query.since"),
    ({"after": "no-tilde"}, "query.after"),
    ({"limit": "1000"}, "query.limit"),
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
