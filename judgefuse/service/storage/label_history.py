"""A verdict's label history: every label, relabel, comment change and undo, in order.

The verdict record keeps only its latest label; the history is what the console's verdict page
and ``GET /v1/verdicts/{id}`` show beside it (docs/design.md, 'The review loop'). Each backend
appends the entry in the same atomic step that writes the label (SQLite's and PostgreSQL's
transaction, Redis's label script), so a label never exists without its entry nor an entry
without its label, also across a crash. Entries are numbered 1, 2, ... per verdict (``seq``)
and only the newest :data:`LABEL_HISTORY_KEEP` are kept: a client that relabels one verdict
forever cannot grow the store without limit, and a gap before the first ``seq`` shown says how
many older entries were dropped.

``by`` names who gave the label (an annotator account's id and name, the annotator name typed
on the review page with a tenant key, ``api`` for ``POST /v1/feedback`` with the tenant key,
``inline`` for a label carried by a judging request): never a key or credential.
"""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from judgefuse.service.storage.errors import StorageCorrupt
from judgefuse.service.storage.records import (
    COMMENT_MAX_CHARS,
    LabelKind,
    LabelStatus,
    Stratum,
    VerdictRecord,
)

__all__ = [
    "LABEL_HISTORY_KEEP",
    "LabelAction",
    "LabelEvent",
    "check_label_by",
    "event_body",
    "numbered",
    "parse_label_event",
]

LABEL_HISTORY_KEEP = 50
"""Entries kept per verdict (the newest); older ones are dropped as new ones come."""

BY_MAX_CHARS = 256

LabelAction = Literal["labelled", "relabelled", "commented", "undone"]
"""``labelled`` (a first label, or the first after an undo), ``relabelled`` (another kind
replaced it), ``commented`` (the same kind again with a new comment), ``undone`` (taken back on
the review page: the verdict is unlabelled again)."""

_ACTION_OF_STATUS: dict[LabelStatus, LabelAction] = {
    "labelled": "labelled", "relabelled": "relabelled", "unchanged": "commented"}


class LabelEvent(BaseModel):
    """One entry of a verdict's label history."""

    model_config = ConfigDict(extra="forbid")

    seq: int = Field(ge=1)
    """1, 2, ... per verdict, assigned by storage."""
    at: float
    """Epoch seconds: the label's ``labelled_at``, or when the undo happened."""
    action: LabelAction
    label: LabelKind | None = None
    """The label set (None for ``undone``)."""
    previous: LabelKind | None = None
    """The label it replaced (for ``undone``: the one taken back)."""
    by: str | None = Field(default=None, max_length=BY_MAX_CHARS)
    comment: str | None = Field(default=None, max_length=COMMENT_MAX_CHARS)
    stratum: Stratum | None = None
    """The verdict's review stratum (None for a record from before the review loop)."""


def check_label_by(by: str | None) -> None:
    """``set_label``'s ``by``: None or a name of at most 256 characters."""
    if by is not None and (not isinstance(by, str) or not by or len(by) > BY_MAX_CHARS):
        raise ValueError(f"by must be a non-empty string of at most {BY_MAX_CHARS} characters")


def event_body(
    record: VerdictRecord, status: LabelStatus | None, label: LabelKind | None, at: float,
    comment: str | None, by: str | None,
) -> str:
    """The entry for a change of ``record`` (as read, before the change) as JSON without its
    ``seq`` (the backend numbers it in the atomic step): ``status`` is ``set_label``'s, or None
    for an undo."""
    action: LabelAction = "undone" if status is None else _ACTION_OF_STATUS[status]
    body = {
        "at": at, "action": action, "label": label, "previous": record.label, "by": by,
        "comment": comment, "stratum": record.review.stratum if record.review else None,
    }
    return json.dumps(body, separators=(",", ":"))


def numbered(seq: int, body: str) -> str:
    """``body`` (an :func:`event_body`) with ``seq`` as its first field: one JSON object."""
    return f'{{"seq":{int(seq)},{body[1:]}'


def parse_label_event(seq: int | None, body: str | bytes, backend: str) -> LabelEvent:
    """A stored entry (``seq`` None: it is in the body); :class:`StorageCorrupt` when invalid."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        return LabelEvent.model_validate_json(text if seq is None else numbered(seq, text))
    except (ValidationError, UnicodeDecodeError) as exc:
        raise StorageCorrupt(f"{backend}: stored label history entry is invalid") from exc


# -- SQL (SQLite and PostgreSQL name the table and its columns alike; psycopg placeholders) ----
LAST_SEQ = "SELECT COALESCE(MAX(seq), 0) FROM label_history WHERE tenant = %s AND id = %s"
"""The verdict's newest entry number (0: none): (tenant, id)."""
APPEND = "INSERT INTO label_history (tenant, id, seq, body) VALUES (%s, %s, %s, %s)"
"""(tenant, id, seq, body)."""
TRIM = "DELETE FROM label_history WHERE tenant = %s AND id = %s AND seq <= %s"
"""Drop the entries past the cap: (tenant, id, newest seq - LABEL_HISTORY_KEEP)."""
READ = "SELECT seq, body FROM label_history WHERE tenant = %s AND id = %s ORDER BY seq"
"""``label_history``: (tenant, id)."""
