"""Service storage: verdicts, idempotent labels, calibration accumulators, thresholds, models.

``SQLiteStorage`` is the embedded default; ``RedisStorage`` shares state between replicas (it
needs the ``redis`` package and is imported lazily); ``PostgresStorage`` (``postgresql://``) is
the system of record. See ``base`` for the contract: ``Storage``, the union of the contracts by
concern (``VerdictStore``, ``LabelLedger``, ``ReviewQueueStore``, ``VersionedRecords``,
``Coordination``, ``RecordArchive``, ``Lifecycle``: :mod:`.contracts`), which a caller may
depend on one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from judgefuse.service.storage.base import (
    Coordination,
    LabelLedger,
    Lifecycle,
    RecordArchive,
    ReviewQueueStore,
    Storage,
    VerdictStore,
    VersionedRecords,
)
from judgefuse.service.storage.checks import Increments, IncrementsFn, Number, hour_of
from judgefuse.service.storage.errors import (
    AccumulatorOverflow,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictNotFound,
)
from judgefuse.service.storage.label_history import LABEL_HISTORY_KEEP, LabelEvent
from judgefuse.service.storage.records import (
    COMMENT_MAX_CHARS,
    DECIDED,
    LabelKind,
    LabelOutcome,
    ModelRecord,
    MonitorEvent,
    ReviewLease,
    ReviewStamp,
    ServingVersions,
    StateBlob,
    Stratum,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.registry import StorageOptions, register_scheme, storage_from_url
from judgefuse.service.storage.sqlite import SQLiteStorage

if TYPE_CHECKING:
    from judgefuse.service.storage.redis import RedisStorage

__all__ = [
    "COMMENT_MAX_CHARS",
    "DECIDED",
    "LABEL_HISTORY_KEEP",
    "AccumulatorOverflow",
    "Coordination",
    "Increments",
    "IncrementsFn",
    "LabelEvent",
    "LabelKind",
    "LabelLedger",
    "LabelOutcome",
    "Lifecycle",
    "ModelRecord",
    "MonitorEvent",
    "Number",
    "RecordArchive",
    "RedisStorage",
    "ReviewLease",
    "ReviewQueueStore",
    "ReviewStamp",
    "SQLiteStorage",
    "ServingVersions",
    "StateBlob",
    "Storage",
    "StorageCorrupt",
    "StorageError",
    "StorageOptions",
    "StorageUnavailable",
    "Stratum",
    "StratumCounts",
    "ThresholdRecord",
    "VerdictExists",
    "VerdictNotFound",
    "VerdictRecord",
    "VerdictStore",
    "VersionedRecords",
    "hour_of",
    "open_storage",
    "register_scheme",
    "storage_from_url",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStorage":
        from judgefuse.service.storage.redis import RedisStorage

        return RedisStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_storage(
    url: str,
    *,
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL",
    redis_record_ttl_s: float | None = None,
) -> Storage:
    """A storage from a URL: ``redis://`` / ``rediss://`` / ``unix://`` -> Redis,
    ``sqlite:///path`` or a plain path -> SQLite (with ``sqlite_synchronous``); other schemes
    as registered in :mod:`~judgefuse.service.storage.registry`. ``redis_record_ttl_s``: see
    :class:`~judgefuse.service.storage.registry.StorageOptions`. The result is not opened yet
    (``await storage.open()``). An unknown scheme raises ``ValueError``."""
    return storage_from_url(url, StorageOptions(
        sqlite_synchronous=sqlite_synchronous, redis_record_ttl_s=redis_record_ttl_s))
