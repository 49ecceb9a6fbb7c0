"""SQLite errors mapped to storage errors by result code, never by message text.

Python 3.11+ carries the SQLite result code on every ``sqlite3.Error``
(``sqlite_errorcode``; an extended code such as ``SQLITE_BUSY_TIMEOUT`` keeps the primary
code in its low 8 bits). Messages change between SQLite versions and locales; codes do not.

* **unavailable** (retry later, 503): busy, locked, cannot open, I/O error, read-only, disk
  full, out of memory, lock protocol, interrupted;
* **corrupt** (stop, a person must look, 500): corrupt image, not a database;
* everything else is a plain :class:`StorageError` (a bug of ours or a constraint).

:data:`PRIMARY_CODES` lists every primary error code SQLite documents (1-28); the tests fail
when one is missing, so a new code is a decision, not a silent default.
"""

from __future__ import annotations

import sqlite3

from judgefuse.service.storage.errors import StorageCorrupt, StorageError, StorageUnavailable

__all__ = ["PRIMARY_CODES", "error_class", "map_sqlite_error"]

PRIMARY_CODES: dict[int, type[StorageError]] = {
    sqlite3.SQLITE_ERROR: StorageError,  # 1: generic SQL error (a bug of ours)
    sqlite3.SQLITE_INTERNAL: StorageError,  # 2
    sqlite3.SQLITE_PERM: StorageUnavailable,  # 3: access permission denied
    sqlite3.SQLITE_ABORT: StorageError,  # 4: callback requested an abort
    sqlite3.SQLITE_BUSY: StorageUnavailable,  # 5
    sqlite3.SQLITE_LOCKED: StorageUnavailable,  # 6
    sqlite3.SQLITE_NOMEM: StorageUnavailable,  # 7
    sqlite3.SQLITE_READONLY: StorageUnavailable,  # 8
    sqlite3.SQLITE_INTERRUPT: StorageUnavailable,  # 9
    sqlite3.SQLITE_IOERR: StorageUnavailable,  # 10
    sqlite3.SQLITE_CORRUPT: StorageCorrupt,  # 11
    sqlite3.SQLITE_NOTFOUND: StorageError,  # 12: unknown opcode / file control
    sqlite3.SQLITE_FULL: StorageUnavailable,  # 13: disk full
    sqlite3.SQLITE_CANTOPEN: StorageUnavailable,  # 14
    sqlite3.SQLITE_PROTOCOL: StorageUnavailable,  # 15: lock protocol
    sqlite3.SQLITE_EMPTY: StorageError,  # 16: unused by SQLite
    sqlite3.SQLITE_SCHEMA: StorageError,  # 17: schema changed
    sqlite3.SQLITE_TOOBIG: StorageError,  # 18: string or blob too big
    sqlite3.SQLITE_CONSTRAINT: StorageError,  # 19
    sqlite3.SQLITE_MISMATCH: StorageError,  # 20: datatype mismatch
    sqlite3.SQLITE_MISUSE: StorageError,  # 21: library misuse
    sqlite3.SQLITE_NOLFS: StorageUnavailable,  # 22: large files unsupported by the host
    sqlite3.SQLITE_AUTH: StorageError,  # 23: authorizer denied
    sqlite3.SQLITE_FORMAT: StorageError,  # 24: unused by SQLite
    sqlite3.SQLITE_RANGE: StorageError,  # 25: bind parameter out of range
    sqlite3.SQLITE_NOTADB: StorageCorrupt,  # 26: not a database file
    sqlite3.SQLITE_NOTICE: StorageError,  # 27
    sqlite3.SQLITE_WARNING: StorageError,  # 28
}


def error_class(code: int | None) -> type[StorageError]:
    """The storage error class of a (primary or extended) SQLite result code."""
    if code is None:
        return StorageError  # raised by the sqlite3 module itself (e.g. a closed connection)
    return PRIMARY_CODES.get(code & 0xFF, StorageError)


def map_sqlite_error(exc: sqlite3.Error, what: str) -> StorageError:
    """``exc`` as the storage error its result code says (see the module docstring)."""
    code = getattr(exc, "sqlite_errorcode", None)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    cls = error_class(code)
    if cls is StorageError:
        return StorageError(f"sqlite: {what}: {name}: {exc}")
    return cls(f"sqlite: {what}: {name}: {exc}")
