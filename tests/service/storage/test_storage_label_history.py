"""A verdict's label history, on every backend (SQLite, Redis, PostgreSQL): every label,
relabel, comment change and undo is appended, numbered 1, 2, ... per verdict, in the same
atomic step as the label (so replaying it gives the stored label), bounded to the newest
``LABEL_HISTORY_KEEP`` entries, and dropped with its verdict by retention."""

from __future__ import annotations

import asyncio
import random

import pytest
from jf_test_support.storage_support import NOW, T0, stamped

from judgefuse.service.ledger import label_increments
from judgefuse.service.storage import LABEL_HISTORY_KEEP, LabelEvent, LabelKind, Storage

KINDS: tuple[LabelKind, ...] = ("A", "B", "tie", "both_bad")


def replay(events: list[LabelEvent]) -> tuple[LabelKind | None, str | None]:
    """The label and comment the history leaves (an undo leaves none)."""
    label: LabelKind | None = None
    comment: str | None = None
    for event in events:
        label, comment = event.label, event.comment
    return label, comment


async def test_every_change_is_an_entry_with_who_and_when(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v0", "audit"))
    assert await storage.label_history("acme", "v0") == []
    await storage.set_label("acme", "v0", "A", label_increments, labelled_at=NOW, by="annotator:a1 (ann)")
    await storage.set_label("acme", "v0", "A", label_increments, labelled_at=NOW + 1)  # unchanged
    await storage.set_label("acme", "v0", "A", label_increments, labelled_at=NOW + 2,
                            comment="A cites the source", by="api")
    await storage.set_label("acme", "v0", "tie", label_increments, labelled_at=NOW + 3, by="api")
    await storage.undo_label("acme", "v0", label_increments, labelled_at=NOW + 3,
                             annotator="ann", lease_s=60, now=NOW + 4)
    await storage.set_label("acme", "v0", "both_bad", label_increments, labelled_at=NOW + 5,
                            comment="both wrong", by="inline")
    history = await storage.label_history("acme", "v0")
    assert [(e.seq, e.action, e.label, e.previous, e.by, e.at) for e in history] == [
        (1, "labelled", "A", None, "annotator:a1 (ann)", NOW),
        (2, "commented", "A", "A", "api", NOW + 2),
        (3, "relabelled", "tie", "A", "api", NOW + 3),
        (4, "undone", None, "tie", "ann", NOW + 4),
        (5, "labelled", "both_bad", None, "inline", NOW + 5),
    ]
    assert [e.comment for e in history] == [None, "A cites the source", None, None, "both wrong"]
    assert {e.stratum for e in history} == {"audit"}
    assert await storage.label_history("acme", "nope") == []
    assert await storage.label_history("other", "v0") == []  # another tenant's is its own


async def test_the_history_replays_to_the_stored_label(storage: Storage) -> None:
    """Random labels of every kind, comments, relabels and undos over a few verdicts: each
    write that changed something is one entry, numbered without gaps, and replaying a
    verdict's entries gives its stored label and comment."""
    rng = random.Random(25)
    ids = [f"v{i}" for i in range(5)]
    for i, vid in enumerate(ids):
        await storage.save_verdict("acme", stamped(vid, rank=i / 10))
    writes = dict.fromkeys(ids, 0)
    clock = NOW
    for _ in range(40):
        vid = rng.choice(ids)
        clock += 1.0
        record = await storage.get_verdict("acme", vid)
        assert record is not None
        if record.label is not None and rng.random() < 0.3:
            assert record.labelled_at is not None
            undone = await storage.undo_label("acme", vid, label_increments,
                                              labelled_at=record.labelled_at, annotator="ann",
                                              lease_s=30, now=clock)
            writes[vid] += undone is not None
        else:
            comment = rng.choice([None, None, "why: " + str(rng.random())])
            outcome = await storage.set_label("acme", vid, rng.choice(KINDS), label_increments,
                                              labelled_at=clock, comment=comment, by="ann")
            unchanged = outcome.status == "unchanged" and outcome.record.labelled_at != clock
            writes[vid] += not unchanged
    for vid in ids:
        history = await storage.label_history("acme", vid)
        record = await storage.get_verdict("acme", vid)
        assert record is not None
        assert [e.seq for e in history] == list(range(1, writes[vid] + 1)), vid
        assert replay(history) == (record.label, record.label_comment), vid


async def test_the_history_keeps_the_newest_entries_only(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v0"))
    total = LABEL_HISTORY_KEEP + 7
    for i in range(total):
        await storage.set_label("acme", "v0", "AB"[i % 2], label_increments,  # type: ignore[arg-type]
                                labelled_at=NOW + i)
    history = await storage.label_history("acme", "v0")
    assert [e.seq for e in history] == list(range(total - LABEL_HISTORY_KEEP + 1, total + 1))
    assert history[-1].label == (await storage.get_verdict("acme", "v0")).label  # type: ignore[union-attr]


async def test_concurrent_labels_of_one_verdict_get_distinct_numbers(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v0"))
    outcomes = await asyncio.gather(*(
        storage.set_label("acme", "v0", KINDS[i % 4], label_increments, labelled_at=NOW + i,
                          by=f"ann{i}")
        for i in range(12)))
    written = sum(o.status != "unchanged" for o in outcomes)
    history = await storage.label_history("acme", "v0")
    assert [e.seq for e in history] == list(range(1, written + 1))
    assert history[-1].label == (await storage.get_verdict("acme", "v0")).label  # type: ignore[union-attr]


async def test_retention_drops_a_verdicts_history_with_it(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("old", created_at=T0 + 10.0))
    await storage.save_verdict("acme", stamped("new", created_at=T0 + 5 * 86400.0))
    for vid in ("old", "new"):
        await storage.set_label("acme", vid, "A", label_increments, labelled_at=NOW, by="ann")
    report = await storage.apply_retention(older_than=T0 + 86400.0, keep_labelled=0)
    assert report.dropped == 1
    assert await storage.get_verdict("acme", "old") is None
    assert await storage.label_history("acme", "old") == []
    assert [e.label for e in await storage.label_history("acme", "new")] == ["A"]


@pytest.mark.parametrize("by", ["", "x" * 257])
async def test_a_bad_name_for_who_is_refused_before_anything_is_written(
    storage: Storage, by: str
) -> None:
    await storage.save_verdict("acme", stamped("v0"))
    with pytest.raises(ValueError, match="by must be"):
        await storage.set_label("acme", "v0", "A", label_increments, by=by)
    assert await storage.label_history("acme", "v0") == []
