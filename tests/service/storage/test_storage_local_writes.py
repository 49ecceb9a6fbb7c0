"""Storage.local_writes (judgefuse.service.storage.local_writes): the in-process counter of writes
per (tenant, panel) that a cached report checks on every poll instead of reading the store. The
template methods that write records mark it, on every backend alike (they are the contract's,
not a backend's): a save for its panel, a label or an undo for the record's panel unless nothing
was written, retention for every tenant, and a label that raised for its whole tenant."""

from __future__ import annotations

from pathlib import Path

import pytest

from judgefuse.service.storage import VerdictNotFound, VerdictRecord
from judgefuse.service.storage.sqlite import SQLiteStorage


def _record(tenant: str, panel: str, vid: str) -> VerdictRecord:
    return VerdictRecord.model_validate({
        "id": vid, "tenant": tenant, "panel": panel, "created_at": 1_700_000_000.0,
        "verdict": {"choice": "A", "confidence": 0.9, "p_a": 0.9, "method": "majority", "votes": []},
    })


def _no_increments(record: VerdictRecord, label: str) -> dict:
    return {}


async def test_writes_mark_their_tenant_and_panel(tmp_path: Path) -> None:
    async with SQLiteStorage(tmp_path / "s.sqlite3") as storage:
        marks = storage.local_writes
        p1, p2, other = (lambda: marks.version("t1", "p1")), (lambda: marks.version("t1", "p2")), \
            (lambda: marks.version("t2", "p1"))
        start = (p1(), p2(), other())
        await storage.save_verdict("t1", _record("t1", "p1", "v1"))
        assert p1() != start[0] and p2() == start[1] and other() == start[2]
        saved = p1()
        await storage.set_label("t1", "v1", "A", _no_increments)
        labelled = p1()
        assert labelled != saved and p2() == start[1]
        await storage.set_label("t1", "v1", "A", _no_increments)  # unchanged: nothing written
        assert p1() == labelled
        outcome = await storage.set_label("t1", "v1", "B", _no_increments)
        relabelled = p1()
        assert relabelled != labelled
        assert await storage.undo_label("t1", "v1", _no_increments, labelled_at=outcome.record.labelled_at,
                                        annotator="ann", lease_s=60) is not None
        undone = p1()
        assert undone != relabelled and p2() == start[1] and other() == start[2]
        with pytest.raises(VerdictNotFound):  # its panel is unknown: the whole tenant
            await storage.set_label("t1", "nope", "A", _no_increments)
        assert p1() != undone and p2() != start[1] and other() == start[2]
        before = (p1(), p2(), other())
        await storage.apply_retention(older_than=0.0, keep_labelled=10)
        assert all(a != b for a, b in zip(before, (p1(), p2(), other()), strict=True))
