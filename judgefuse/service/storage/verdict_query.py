"""The verdict list the console pages through: filters, the keyset cursor, one page.

``Storage.list_verdicts`` serves a panel's verdicts newest first (``created_at`` desc, then id
desc; or oldest first), ``limit`` at a time. Paging is by keyset, never by offset: the cursor is the
(``created_at``, id) of the last record a page examined, and the next page starts strictly
after it, so a page costs the same on the first screen and the thousandth and a verdict stored
meanwhile never shifts a page.

The time range and "labelled or not" are served by each backend's indexes; the other filters
(route, stratum, wrong, judges disagreeing, low confidence) are read from the record, here, the
same way on every backend. A page examines at most ``scan_limit`` records: a rare filter then
returns a short (even empty) page with a cursor to go on from, instead of reading the whole
table in one request. ``VerdictPage.next`` is ``None`` only when nothing older is left.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judgefuse.judges.types import LETTERS
from judgefuse.service.storage.records import Stratum, VerdictRecord

__all__ = ["VerdictCursor", "VerdictPage", "VerdictQuery", "matches"]

Route = Literal["auto_accept", "human_review"]


class VerdictCursor(BaseModel):
    """Where a page stopped: the (``created_at``, id) of the last record it examined."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    created_at: float
    id: str = Field(min_length=1, max_length=256)

    @field_validator("created_at")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("cursor time must be finite")
        return value

    def token(self) -> str:
        """The cursor as one URL-safe string (``repr`` keeps the float exact)."""
        return f"{self.created_at!r}~{self.id}"

    @classmethod
    def parse(cls, token: str) -> VerdictCursor:
        """A :meth:`token` back into a cursor; ``ValueError`` naming what is wrong."""
        when, sep, vid = token.partition("~")
        if not sep:
            raise ValueError("cursor must look like '<created_at>~<id>'")
        try:
            created_at = float(when)
        except ValueError:
            raise ValueError("cursor time is not a number") from None
        return cls(created_at=created_at, id=vid)


class VerdictQuery(BaseModel):
    """Which of a panel's verdicts to list. Every filter left at its default lets all through."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    panel: str = Field(min_length=1, max_length=256)
    route: Route | None = None
    stratum: Stratum | None = None
    labelled: bool | None = None
    """True: labelled only; False: unlabelled only; None: both."""
    wrong: bool = False
    """Only verdicts labelled ``A`` or ``B`` whose fused choice differs from the label (a tie
    or "both bad" label says neither answer was preferred: never wrong)."""
    disagreeing: bool = False
    """Only verdicts whose valid votes do not all choose the same answer."""
    below_confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    """Only verdicts whose fused confidence is below this."""
    since: float | None = None
    """``created_at`` at or after (epoch seconds)."""
    until: float | None = None
    """``created_at`` strictly before (epoch seconds)."""
    oldest_first: bool = False
    """List oldest first (ties: id ascending); the cursor then moves forward in time."""

    @property
    def indexed_only(self) -> bool:
        """Whether every filter is one the backends' indexes serve (time range, labelled)."""
        return (self.route is None and self.stratum is None and not self.wrong
                and not self.disagreeing and self.below_confidence is None)

    @property
    def index_labelled(self) -> bool | None:
        """What the backend's index may narrow to: a wrong verdict is a labelled one."""
        return True if self.wrong else self.labelled


class VerdictPage(BaseModel):
    """One page of :meth:`Storage.list_verdicts`: the matching records, newest first, how many
    records were examined, and the cursor of the next page (``None``: nothing older left)."""

    model_config = ConfigDict(extra="forbid")

    records: list[VerdictRecord]
    scanned: int = Field(ge=0)
    next: VerdictCursor | None = None


def _route(record: VerdictRecord) -> str | None:
    if record.review is not None and record.review.route is not None:
        return record.review.route
    return record.verdict.route


def _stratum(record: VerdictRecord) -> str:
    if record.review is not None:
        return record.review.stratum
    return "review" if record.verdict.route == "human_review" else "none"


def disagreeing(record: VerdictRecord) -> bool:
    """Whether the record's valid votes choose more than one answer."""
    return len({v.choice for v in record.verdict.votes if v.choice is not None}) > 1


def matches(record: VerdictRecord, query: VerdictQuery) -> bool:
    """Whether ``record`` passes every filter of ``query`` (its panel and time range included,
    so a backend may serve a superset and this still decides)."""
    if record.panel != query.panel:
        return False
    if query.since is not None and record.created_at < query.since:
        return False
    if query.until is not None and record.created_at >= query.until:
        return False
    if query.labelled is not None and (record.label is not None) != query.labelled:
        return False
    if query.route is not None and _route(record) != query.route:
        return False
    if query.stratum is not None and _stratum(record) != query.stratum:
        return False
    if query.wrong and (record.label not in LETTERS or record.verdict.choice == record.label):
        return False
    if query.disagreeing and not disagreeing(record):
        return False
    return not (
        query.below_confidence is not None and record.verdict.confidence >= query.below_confidence
    )
