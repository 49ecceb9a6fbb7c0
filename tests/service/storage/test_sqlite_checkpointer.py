"""Background WAL checkpoints of the SQLite backend (:mod:`judgefuse.service.storage.sqlite.checkpointer`).

The pages a commit appends to the WAL reach the database file only at a checkpoint. The writer's
automatic one is pushed back to a backstop far past these tests' writes, so the file growing is
the checkpoint thread's doing; with the thread stopped it does not grow.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

from jf_test_support.storage_support import make_record
from jf_test_support.waiting import poll_until

from judgefuse.service.storage import SQLiteStorage
from judgefuse.service.storage.sqlite.checkpointer import BACKSTOP_PAGES


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.is_alive()}


async def _save(storage: SQLiteStorage, prefix: str, n: int) -> None:
    await asyncio.gather(*(storage.save_verdict("acme", make_record(f"{prefix}{i}")) for i in range(n)))


async def test_committed_pages_reach_the_database_file_without_the_writers_own_checkpoint(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.sqlite3"
    storage = SQLiteStorage(path)
    await storage.open()
    try:
        assert "judgefuse-sqlite-checkpoint" in _threads()
        assert await storage._run("pragma", lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone()[0]) \
            == BACKSTOP_PAGES
        await asyncio.sleep(3 * storage.checkpointer.every_s)  # the schema's pages copied back
        before = path.stat().st_size
        await _save(storage, "v", 300)  # ~1,000 pages of WAL, well under the backstop
        await poll_until(lambda: path.stat().st_size > before, every_s=0.05)
        assert path.stat().st_size > before, "the WAL was never copied into the file"
        assert storage.checkpointer.checkpoints >= 1
    finally:
        await storage.close()
    assert "judgefuse-sqlite-checkpoint" not in _threads()


async def test_without_the_thread_the_pages_stay_in_the_wal(tmp_path: Path) -> None:
    """The control: the same writes with the thread stopped leave the file as it was (so the
    test above measures the thread, not some other checkpoint)."""
    path = tmp_path / "c.sqlite3"
    storage = SQLiteStorage(path)
    await storage.open()
    try:
        await asyncio.sleep(3 * storage.checkpointer.every_s)
        await asyncio.to_thread(storage.checkpointer.stop)
        before = path.stat().st_size
        await _save(storage, "v", 300)
        await asyncio.sleep(5 * storage.checkpointer.every_s)
        assert path.stat().st_size == before
        # and nothing is lost: every verdict reads back from the WAL
        reader = sqlite3.connect(path)
        try:
            assert reader.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0] == 300
        finally:
            reader.close()
    finally:
        await storage.close()
