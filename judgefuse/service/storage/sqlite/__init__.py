"""The SQLite backend: :class:`SQLiteStorage`, the embedded default (one database file).

:mod:`.backend` is the storage (connection, worker thread, transactions; durability in its
docstring); one job each: :mod:`.schema`, :mod:`.accumulators`, :mod:`.review`,
:mod:`.versioned`, :mod:`.retention` (retention and export scans), :mod:`.cache` (accumulator
read cache), :mod:`.group_commit`, :mod:`.errors` (sqlite3 error -> storage error).
"""

from judgefuse.service.storage.sqlite.backend import SCHEMA_VERSION, SQLiteStorage

__all__ = ["SCHEMA_VERSION", "SQLiteStorage"]
