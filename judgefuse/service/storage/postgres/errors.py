"""PostgreSQL errors mapped to storage errors by SQLSTATE class, never by message text, and
the connection URL's password kept out of every message.

* **unavailable** (retry later, 503): connection failures (class 08), insufficient resources
  (53: disk full, out of memory, too many connections), operator intervention (57: admin or
  crash shutdown, the server starting up, a statement timeout), a serialization failure or
  deadlock (40) that outlived the retries, and the pool's own timeout when no connection can be
  had;
* **corrupt** (stop, a person must look, 500): data corrupted / index corrupted (XX001, XX002);
* **overflow**: a numeric value out of range (22003) in an accumulator write;
* a login the server refused for good (wrong password, unknown role or database; see
  :func:`login_refused`) and everything else is a plain
  :class:`StorageError` (a bug of ours, a constraint, or configuration).
"""

from __future__ import annotations

import psycopg
import psycopg_pool

from judgefuse.service.storage.errors import (
    AccumulatorOverflow,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
)
from judgefuse.service.storage.url_secrets import redact_url as _redact_url
from judgefuse.service.storage.url_secrets import secret_forms

__all__ = [
    "UNAVAILABLE_CLASSES",
    "error_class",
    "login_refused",
    "map_pg_error",
    "redact_url",
    "secret_forms",
]

UNAVAILABLE_CLASSES = ("08", "40", "53", "57", "58")
"""SQLSTATE classes a retry later may fix."""

RETRY_STATES = ("40001", "40P01")
"""Serialization failure and deadlock: the transaction is retried before it is reported."""


def redact_url(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``."""
    return _redact_url(url, "postgresql")


_TRANSIENT_FATAL = (
    "starting up", "shutting down", "recovery mode", "too many", "connection slots",
    "not yet accepting", "in hot standby",
)


def login_refused(exc: BaseException) -> bool:
    """A connection the server refused for good (wrong password, unknown role or database):
    retrying will not help. libpq gives a failed connection no SQLSTATE, only the server's
    ``FATAL:`` message, so this one case reads the text: a ``FATAL`` that is not one of the
    transient refusals (starting up, shutting down, too many connections)."""
    text = str(exc)
    if "FATAL:" not in text:
        return False  # no answer from a server: refused, unreachable, timed out
    return not any(word in text for word in _TRANSIENT_FATAL)


def error_class(exc: BaseException) -> type[StorageError]:
    """The storage error class for a driver or pool exception (see the module docstring)."""
    if isinstance(exc, psycopg_pool.PoolTimeout | psycopg_pool.PoolClosed):
        return StorageUnavailable
    state = getattr(exc, "sqlstate", None)
    if state is None:
        # raised by the driver itself: a broken or closed connection, a failed connect
        if not isinstance(exc, psycopg.OperationalError):
            return StorageError
        return StorageError if login_refused(exc) else StorageUnavailable
    if state in ("XX001", "XX002"):
        return StorageCorrupt
    if state == "22003":
        return AccumulatorOverflow
    if state[:2] in UNAVAILABLE_CLASSES:
        return StorageUnavailable
    return StorageError


def map_pg_error(exc: BaseException, what: str, where: str, secrets: list[str]) -> StorageError:
    """``exc`` as a storage error naming the operation and the redacted URL, scrubbed of
    every form of the password."""
    cls = error_class(exc)
    state = getattr(exc, "sqlstate", None)
    text = f"postgresql at {where}: {what}: {type(exc).__name__}"
    if state:
        text += f" [{state}]"
    text += f": {exc}"
    for secret in secrets:
        text = text.replace(secret, "***")
    if cls is AccumulatorOverflow:
        return AccumulatorOverflow(f"{text} (an accumulator field would overflow)")
    return cls(text)
