"""Opening an up-to-date SQLite file takes no write lock (docs/design.md, 'Bounded learning'):
a refit's worker process opens the gateway's store at a low CPU priority to read its labels, and
a schema transaction in that open once held every verdict write of the gateway behind it."""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage import StorageError, open_storage
from judgefuse.service.storage.sqlite import SQLiteStorage


async def test_a_second_open_of_a_current_file_reads_while_another_connection_holds_the_write_lock(tmp_path):
    path = tmp_path / "store.db"
    async with SQLiteStorage(path):
        pass  # a file at the current schema, with its retention indexes
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")  # the gateway mid-commit
    try:
        reader = open_storage(SQLiteStorage(path).reopen_url() or "")
        reader.busy_timeout_s = 0.2  # type: ignore[attr-defined]
        async with reader:  # no lock wanted: opens at once
            assert await reader.iter_labelled("t", "p", limit=10) == []
    finally:
        writer.execute("ROLLBACK")
        writer.close()


async def test_a_new_file_still_gets_its_schema_under_the_write_lock(tmp_path):
    path = tmp_path / "new.db"
    writer = sqlite3.connect(path, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")  # as every store is: the lock is the schema's
    writer.execute("CREATE TABLE other (x)")
    writer.execute("BEGIN IMMEDIATE")
    try:
        storage = SQLiteStorage(path, busy_timeout_s=0.2)
        try:
            await storage.open()
        except StorageError:
            pass  # busy: the schema needs the lock a writer holds
        else:
            raise AssertionError("created the schema without the write lock")
        finally:
            await storage.close()
    finally:
        writer.execute("ROLLBACK")
        writer.close()
