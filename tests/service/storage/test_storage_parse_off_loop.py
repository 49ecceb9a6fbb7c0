"""Large reads are parsed off the event loop (``checks.parse_records``): on every backend the
records read back are the same whichever side of ``PARSE_OFF_LOOP_BYTES`` they fall, the parse
past it runs in another thread, and a corrupt stored record is still a ``StorageCorrupt``."""

from __future__ import annotations

import threading

import pytest
from jf_test_support.storage_support import T0, label, make_record

from judgefuse.service.storage import Storage, StorageCorrupt, VerdictRecord, checks


async def test_large_reads_parse_in_a_thread_with_the_same_records(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(4):
        await storage.save_verdict("acme", make_record(f"v{i}", created_at=T0 + i))
        await label(storage, f"v{i}", "A" if i % 2 else "B")
    inline_labelled = await storage.iter_labelled("acme", "p1")
    inline_recent = await storage.iter_recent("acme", "p1", limit=10)
    threads: list[str] = []
    original = checks.parse_record

    def noting(raw: str | bytes, backend: str) -> VerdictRecord:
        threads.append(threading.current_thread().name)
        return original(raw, backend)

    monkeypatch.setattr(checks, "parse_record", noting)
    monkeypatch.setattr(checks, "PARSE_OFF_LOOP_BYTES", 0)
    assert await storage.iter_labelled("acme", "p1") == inline_labelled
    assert await storage.iter_recent("acme", "p1", limit=10) == inline_recent
    assert len(threads) == 8 and threading.main_thread().name not in threads


async def test_corrupt_record_still_raises_off_loop() -> None:
    with pytest.raises(StorageCorrupt, match="sqlite: stored verdict record is invalid"):
        await checks.parse_records(["{}" * 40_000], "sqlite")
    assert await checks.parse_records([None], "sqlite") == []
