"""A storage scheme: ``jfxsqlite://DIR`` keeps the records in ``DIR/judgefuse.db`` (SQLite, NORMAL sync)."""

from __future__ import annotations

from pathlib import Path

from judgefuse.service.storage import SQLiteStorage, StorageOptions
from judgefuse.service.storage.registry import register_scheme


def open_directory(url: str, options: StorageOptions) -> SQLiteStorage:
    directory = Path(url.split("://", 1)[1])
    directory.mkdir(parents=True, exist_ok=True)
    return SQLiteStorage(directory / "judgefuse.db", synchronous="NORMAL")


register_scheme("jfxsqlite", open_directory)
