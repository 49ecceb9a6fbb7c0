"""The storage's typed errors (every backend maps its own exceptions to these).

Backend exceptions are mapped at the boundary to :class:`StorageError` and its subclasses,
raised ``from`` the original. Messages never carry credentials (a Redis URL's password is
redacted). Programming errors (a bad tenant name, a record whose tenant does not match, a
non-finite increment) are ``ValueError``, raised by :mod:`.checks` before any backend runs.
"""

from __future__ import annotations

from judgefuse.errors import JudgefuseError

__all__ = [
    "AccumulatorOverflow",
    "StorageCorrupt",
    "StorageError",
    "StorageUnavailable",
    "VerdictExists",
    "VerdictNotFound",
]


class StorageError(JudgefuseError):
    """Any storage failure. Not retryable unless it is a :class:`StorageUnavailable`."""


class StorageUnavailable(StorageError):
    """The store cannot be reached or is busy (connection refused, timeout, lock). Retryable."""


class VerdictNotFound(StorageError):
    """No verdict with this id under this tenant."""

    def __init__(self, tenant: str, verdict_id: str) -> None:
        super().__init__(f"verdict {verdict_id!r} not found for tenant {tenant!r}")
        self.tenant = tenant
        self.verdict_id = verdict_id


class VerdictExists(StorageError):
    """``save_verdict`` with an id the tenant already used for a different record."""

    def __init__(self, tenant: str, verdict_id: str) -> None:
        super().__init__(f"verdict {verdict_id!r} already exists for tenant {tenant!r}")
        self.tenant = tenant
        self.verdict_id = verdict_id


class AccumulatorOverflow(StorageError):
    """A label would push an integer field beyond int64 (or a float beyond 1e300).

    Nothing of that label was written. Bucket or rotate accumulators long before this.
    """


class StorageCorrupt(StorageError):
    """Stored data cannot be read back (not a database, a malformed file, an invalid record)."""
