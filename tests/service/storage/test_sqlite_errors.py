"""SQLite errors are classified by result code (``sqlite_errorcode``), never by message text."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from judgefuse.service.storage import StorageCorrupt, StorageError, StorageUnavailable
from judgefuse.service.storage.sqlite.errors import PRIMARY_CODES, error_class, map_sqlite_error

# SQLite's documented primary result codes that are errors (https://sqlite.org/rescode.html):
# 0 is OK, 100/101 are ROW/DONE.
DOCUMENTED_PRIMARY_ERRORS = range(1, 29)


def test_every_primary_error_code_is_mapped() -> None:
    unmapped = [code for code in DOCUMENTED_PRIMARY_ERRORS if code not in PRIMARY_CODES]
    assert not unmapped, f"SQLite result codes with no storage error class: {unmapped}"


def test_every_extended_code_the_module_exports_maps_by_its_primary() -> None:
    primary_names = {name for name in dir(sqlite3) if name.startswith("SQLITE_")
                     and getattr(sqlite3, name) in PRIMARY_CODES and name.count("_") == 1}
    extended = {name: getattr(sqlite3, name) for name in dir(sqlite3)
                if name.startswith("SQLITE_") and isinstance(getattr(sqlite3, name), int)
                and getattr(sqlite3, name) > 0xFF and name.rsplit("_", 1)[0] in primary_names}
    assert len(extended) > 20, "Python 3.11+ exports the extended result codes"
    for name, code in extended.items():
        primary = getattr(sqlite3, name.rsplit("_", 1)[0])
        assert code & 0xFF == primary, name
        assert error_class(code) is PRIMARY_CODES[primary], name


def _raised(fn) -> sqlite3.Error:  # type: ignore[no-untyped-def]
    with pytest.raises(sqlite3.Error) as caught:
        fn()
    return caught.value


def test_real_errors_map_by_code(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES ('a')")

    constraint = _raised(lambda: conn.execute("INSERT INTO t VALUES ('a')"))
    assert constraint.sqlite_errorcode & 0xFF == sqlite3.SQLITE_CONSTRAINT
    mapped = map_sqlite_error(constraint, "insert")
    assert type(mapped) is StorageError and "SQLITE_CONSTRAINT" in str(mapped)

    other = sqlite3.connect(db, timeout=0, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    busy = _raised(lambda: other.execute("BEGIN IMMEDIATE"))
    assert isinstance(map_sqlite_error(busy, "begin"), StorageUnavailable)
    conn.execute("ROLLBACK")
    other.close()
    conn.close()

    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database file" * 200)
    notadb = _raised(lambda: sqlite3.connect(junk).execute("SELECT * FROM sqlite_master"))
    assert isinstance(map_sqlite_error(notadb, "read"), StorageCorrupt)

    cantopen = _raised(lambda: sqlite3.connect(tmp_path / "no" / "such" / "dir.db"))
    assert isinstance(map_sqlite_error(cantopen, "open"), StorageUnavailable)


def test_the_message_text_does_not_decide() -> None:
    """A constraint error whose text says "locked" is still a constraint error (not 503)."""
    exc = sqlite3.IntegrityError("UNIQUE constraint failed: database is locked, malformed")
    exc.sqlite_errorcode = sqlite3.SQLITE_CONSTRAINT_UNIQUE
    exc.sqlite_errorname = "SQLITE_CONSTRAINT_UNIQUE"
    assert type(map_sqlite_error(exc, "insert")) is StorageError
    busy = sqlite3.OperationalError("something new")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY_SNAPSHOT
    assert isinstance(map_sqlite_error(busy, "read"), StorageUnavailable)
    bare = sqlite3.ProgrammingError("Cannot operate on a closed database.")
    assert type(map_sqlite_error(bare, "read")) is StorageError
