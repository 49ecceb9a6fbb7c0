"""Service storage: verdicts, idempotent labels, calibration accumulators, thresholds, models.

``SQLiteStorage`` is the embedded default; ``RedisStorage`` shares state between replicas (it
needs the ``redis`` package and is imported lazily). See ``base`` for the contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from judgefuse.service.storage.base import (
    AccumulatorOverflow,
    Increments,
    IncrementsFn,
    Number,
    Storage,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictNotFound,
    hour_of,
)
from judgefuse.service.storage.records import (
    LabelOutcome,
    ModelRecord,
    MonitorEvent,
    ReviewLease,
    ReviewStamp,
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
    "AccumulatorOverflow",
    "Increments",
    "IncrementsFn",
    "LabelOutcome",
    "ModelRecord",
    "MonitorEvent",
    "Number",
    "RedisStorage",
    "ReviewLease",
    "ReviewStamp",
    "SQLiteStorage",
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
