"""The verdict list's query string: parsed into a :class:`VerdictQuery` with the field at fault
named, and written back for the links (next page, preset filters).

Times are UTC, as ``YYYY-MM-DDTHH:MM`` (what a ``datetime-local`` input sends) or epoch seconds,
between 1970-01-01 and 9999-12-31: the form shows each time back, and ``time.gmtime`` raises on
``nan``, ``inf`` or a year past 9999 (unchecked, such a time would be a 500, not a 422). A cursor's
time (``after``) is held to the same range.
"""

from __future__ import annotations

import calendar
import time
from typing import Any
from urllib.parse import urlencode

from judgefuse.service.errors import FieldProblem
from judgefuse.service.storage.verdict_query import VerdictCursor, VerdictQuery

__all__ = ["FILTER_FIELDS", "ListParams", "parse_time", "show_time"]

FILTER_FIELDS = ("route", "stratum", "labelled", "wrong", "disagreeing", "below", "since", "until",
                 "order")
"""The query parameters that filter (``panel``, ``after`` and ``limit`` are the others)."""
PAGE_SIZES = (25, 50, 100)
LATEST = 253402300799.0
"""9999-12-31T23:59:59 UTC, the last time ``show_time`` can write (the earliest is the epoch)."""
_TIME_PROBLEM = ("must be a UTC time between 1970-01-01T00:00 and 9999-12-31T23:59 like 2026-11-26T08:00, "
                 "or epoch seconds in that range")


def parse_time(field: str, value: str) -> float:
    """UTC ``YYYY-MM-DDTHH:MM[:SS]`` or epoch seconds, within what :func:`show_time` can write
    back (module docstring); FieldProblem otherwise."""
    text = value.strip()
    try:
        return in_range(field, float(text))
    except ValueError:
        pass  # not a number: one of the written forms
    for fmt in ("%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            parsed = time.strptime(text, fmt)
        except ValueError:
            continue
        return in_range(field, float(calendar.timegm(parsed)))
    raise FieldProblem(f"query.{field}", _TIME_PROBLEM)


def in_range(field: str, epoch: float, problem: str = _TIME_PROBLEM) -> float:
    """``epoch`` if it is a time the list can show (0 to :data:`LATEST`; ``nan`` fails both
    comparisons); FieldProblem naming ``field`` otherwise."""
    if not 0.0 <= epoch <= LATEST:
        raise FieldProblem(f"query.{field}", problem)
    return epoch


def show_time(epoch: float | None) -> str:
    """Epoch seconds as the ``datetime-local`` form (UTC), '' for None."""
    return "" if epoch is None else time.strftime("%Y-%m-%dT%H:%M", time.gmtime(epoch))


def _flag(field: str, value: str | None) -> bool | None:
    if value in (None, ""):
        return None
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise FieldProblem(f"query.{field}", "must be 1 or 0 (or left out)")


class ListParams:
    """The list page's parameters, checked; ``raw`` keeps what the form shows back."""

    def __init__(self, panel: str, params: dict[str, str]) -> None:
        self.raw = {k: params.get(k, "") for k in FILTER_FIELDS}
        route = params.get("route") or None
        if route not in (None, "auto_accept", "human_review"):
            raise FieldProblem("query.route", "must be auto_accept or human_review")
        stratum = params.get("stratum") or None
        if stratum not in (None, "review", "audit", "none", "inline"):
            raise FieldProblem("query.stratum", "must be review, audit, none or inline")
        below = params.get("below") or None
        below_value = None
        if below is not None:
            try:
                below_value = float(below)
            except ValueError:
                raise FieldProblem("query.below", "must be a confidence between 0 and 1") from None
            if not 0.0 <= below_value <= 1.0:
                raise FieldProblem("query.below", "must be a confidence between 0 and 1")
        order = params.get("order") or "newest"
        if order not in ("newest", "oldest"):
            raise FieldProblem("query.order", "must be newest or oldest")
        since = parse_time("since", params["since"]) if params.get("since") else None
        until = parse_time("until", params["until"]) if params.get("until") else None
        self.query = VerdictQuery.model_validate({
            "panel": panel, "route": route, "stratum": stratum,
            "labelled": _flag("labelled", params.get("labelled")),
            "wrong": bool(_flag("wrong", params.get("wrong"))),
            "disagreeing": bool(_flag("disagreeing", params.get("disagreeing"))),
            "below_confidence": below_value, "since": since, "until": until,
            "oldest_first": order == "oldest",
        })
        after = params.get("after") or None
        try:
            self.after = VerdictCursor.parse(after) if after else None
        except ValueError as exc:
            raise FieldProblem("query.after", str(exc)) from None
        if self.after is not None:
            in_range("after", self.after.created_at, f"cursor time must be epoch seconds from 0 to {LATEST:.0f}")
        try:
            self.limit = int(params.get("limit") or 50)
        except ValueError:
            raise FieldProblem("query.limit", "must be one of 25, 50, 100") from None
        if self.limit not in PAGE_SIZES:
            raise FieldProblem("query.limit", "must be one of 25, 50, 100")
        self.panel = panel

    def link(self, **changes: Any) -> str:
        """This list's URL with ``changes`` (None drops a parameter)."""
        values: dict[str, Any] = {"panel": self.panel, **{k: v for k, v in self.raw.items() if v}}
        if self.limit != 50:
            values["limit"] = self.limit
        for key, value in changes.items():
            if value is None:
                values.pop(key, None)
            else:
                values[key] = value
        return "/console/verdicts?" + urlencode(values)

    @property
    def filtered(self) -> bool:
        return any(self.raw.values())
