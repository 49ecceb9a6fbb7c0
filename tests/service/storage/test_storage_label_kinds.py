"""Label kinds, comments and undo in storage, on every backend (SQLite, Redis, PostgreSQL):
``tie`` and ``both_bad`` are stored as such and counted under their own key, never in a
calibration key nor in ``iter_labelled`` / ``count_labelled`` (what tuning and refits read);
an undo removes a label and its increments so that the accumulators equal a recount of the
labels left, and puts a queued item back, leased to the annotator who undid it."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from jf_test_support.storage_support import NOW, T0, counts, stamped

from judgefuse.service.ledger import label_increments, label_kind_counts, label_kind_key, method_key
from judgefuse.service.storage import LabelKind, Storage, VerdictNotFound, VerdictRecord

KINDS: tuple[LabelKind, ...] = ("A", "B", "tie", "both_bad")


async def _n(storage: Storage) -> int:
    """Labels in the panel's majority calibration key (its per-bin counts summed)."""
    fields = await storage.read_accumulator("acme", method_key("p1", "majority"))
    return int(sum(v for k, v in fields.items() if k[:1] == "n" and k[1:].isdigit()))


async def test_ties_and_both_bad_are_stored_and_counted_apart(storage: Storage) -> None:
    for i in range(4):
        await storage.save_verdict("acme", stamped(f"v{i}", rank=i / 10))
    for vid, kind in zip(("v0", "v1", "v2", "v3"), ("A", "tie", "both_bad", "B"), strict=True):
        await storage.set_label("acme", vid, kind, label_increments, labelled_at=NOW,
                                comment="both wrong: 2+2 is 4" if kind == "both_bad" else None)
    stored = await storage.get_verdict("acme", "v2")
    assert stored is not None and stored.label == "both_bad"
    assert stored.label_comment == "both wrong: 2+2 is 4" and stored.decided_at is None
    assert sorted(r.id for r in await storage.iter_labelled("acme", "p1")) == ["v0", "v3"]
    assert await storage.count_labelled("acme", "p1") == 2
    assert await label_kind_counts(storage, "acme", "p1") == {"tie": 1, "both_bad": 1}
    assert await _n(storage) == 2
    exported = [r.id async for r in storage.iter_records("acme", labelled_only=True)]
    assert exported == ["v0", "v3"]  # an A/B label, as iter_labelled
    assert len([r async for r in storage.iter_records("acme")]) == 4
    # the queue's progress counts every kind: four items done, none left
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts(4, 0, 0, 4)

    outcome = await storage.set_label("acme", "v1", "A", label_increments, labelled_at=NOW + 1)
    assert (outcome.status, outcome.previous) == ("relabelled", "tie")
    assert outcome.record.decided_at == NOW + 1
    assert await storage.count_labelled("acme", "p1") == 3
    assert await label_kind_counts(storage, "acme", "p1") == {"tie": 0, "both_bad": 1}
    assert await _n(storage) == 3
    again = await storage.set_label("acme", "v1", "A", label_increments)
    assert again.status == "unchanged"
    noted = await storage.set_label("acme", "v1", "A", label_increments, comment="sure")
    assert noted.status == "unchanged" and noted.record.label_comment == "sure"


async def test_bad_kinds_and_long_comments_are_refused(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v0"))
    with pytest.raises(ValueError, match="label must be"):
        await storage.set_label("acme", "v0", "C", label_increments)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="comment"):
        await storage.set_label("acme", "v0", "A", label_increments, comment="x" * 2001)
    assert (await storage.get_verdict("acme", "v0")).label is None  # type: ignore[union-attr]


async def test_undo_returns_the_item_leased_to_its_annotator(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v0", rank=0.1))
    await storage.save_verdict("acme", stamped("v1", rank=0.2))
    assert [x.record.id for x in await storage.lease_review(
        "acme", "p1", n=1, annotator="ann", lease_s=60, now=NOW)] == ["v0"]
    labelled = await storage.set_label("acme", "v0", "B", label_increments, labelled_at=NOW + 5,
                                       comment="B explains it")
    assert await storage.undo_label("acme", "v0", label_increments, labelled_at=NOW + 4,
                                    annotator="ann", lease_s=60, now=NOW + 6) is None
    undone = await storage.undo_label("acme", "v0", label_increments, labelled_at=NOW + 5,
                                      annotator="ann", lease_s=60, now=NOW + 6)
    assert undone is not None and undone.label is None and undone.label_comment is None
    assert undone.decided_at == labelled.record.decided_at == NOW + 5  # kept: monitors fed once
    stored = await storage.get_verdict("acme", "v0")
    assert stored is not None and stored.label is None and stored.labelled_at is None
    assert await storage.count_labelled("acme") == 0 and await storage.iter_labelled("acme") == []
    assert (await storage.review_stats("acme", "p1", now=NOW + 7))["review"] == counts(2, 1, 1, 0)
    # the undone item is held by "ann" again: another annotator gets the other one
    assert [x.record.id for x in await storage.lease_review(
        "acme", "p1", n=2, annotator="bob", lease_s=60, now=NOW + 7)] == ["v1"]
    assert await storage.undo_label("acme", "v0", label_increments, labelled_at=NOW + 5,
                                    annotator="ann", lease_s=60, now=NOW + 8) is None
    assert await storage.release_review("acme", "v0", "ann", now=NOW + 8)
    with pytest.raises(VerdictNotFound):
        await storage.undo_label("acme", "nope", label_increments, labelled_at=NOW,
                                 annotator="ann", lease_s=60)


def _nonzero(fields: dict[str, float]) -> dict[str, float]:
    return {k: v for k, v in fields.items() if v != 0}


async def test_labels_relabels_and_undos_leave_a_recount(storage: Storage) -> None:
    """Random labels of every kind, relabels and undos: every accumulator equals the sum of
    ``label_increments`` over the labels left, and iter_labelled holds exactly the A/B ones."""
    rng = random.Random(7)
    records: dict[str, VerdictRecord] = {}
    for i in range(12):
        record = stamped(f"v{i:02d}", rank=rng.random(), created_at=T0 + 10.0 + 1800.0 * i)
        records[record.id] = record
        await storage.save_verdict("acme", record)
    final: dict[str, tuple[LabelKind, float]] = {}
    clock = NOW
    for _ in range(60):
        vid = rng.choice(sorted(records))
        clock += 1.0
        if vid in final and rng.random() < 0.35:
            assert await storage.undo_label("acme", vid, label_increments,
                                            labelled_at=final[vid][1], annotator="ann",
                                            lease_s=30, now=clock) is not None
            del final[vid]
        else:
            kind = rng.choice(KINDS)
            outcome = await storage.set_label("acme", vid, kind, label_increments,
                                              labelled_at=clock)
            if outcome.status != "unchanged":
                final[vid] = (kind, clock)
    expected: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for vid, (kind, _at) in final.items():
        for key, fields in label_increments(records[vid], kind).items():
            for field, delta in fields.items():
                expected[key][field] += delta
    keys = set(await storage.list_accumulators("acme", "p1/")) | set(expected)
    assert label_kind_key("p1", "tie") in keys or all(k != "tie" for k, _ in final.values())
    for key in sorted(keys):
        got = _nonzero(await storage.read_accumulator("acme", key))
        assert got == pytest.approx(_nonzero(dict(expected.get(key, {})))), key
    decided = sorted(v for v, (kind, _) in final.items() if kind in ("A", "B"))
    assert sorted(r.id for r in await storage.iter_labelled("acme", "p1")) == decided
    assert await storage.count_labelled("acme", "p1") == len(decided)
    stats = (await storage.review_stats("acme", "p1", now=clock + 100))["review"]
    assert (stats.labelled, stats.queued) == (len(final), len(records) - len(final))
