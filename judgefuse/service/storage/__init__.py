"""Service storage: verdicts, idempotent labels, calibration accumulators, thresholds, models.

``SQLiteStorage`` is the embedded default; ``RedisStorage`` shares state between replicas (it
needs the ``redis`` package and is imported lazily). See ``base`` for the contract.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    ReviewLease,
    ReviewStamp,
    Stratum,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.sqlite import SQLiteStorage

if TYPE_CHECKING:
    from judgefuse.service.storage.redis import RedisStorage

__all__ = [
    "AccumulatorOverflow",
    "Increments",
    "IncrementsFn",
    "LabelOutcome",
    "ModelRecord",
    "Number",
    "RedisStorage",
    "ReviewLease",
    "ReviewStamp",
    "SQLiteStorage",
    "Storage",
    "StorageCorrupt",
    "StorageError",
    "StorageUnavailable",
    "Stratum",
    "StratumCounts",
    "ThresholdRecord",
    "VerdictExists",
    "VerdictNotFound",
    "VerdictRecord",
    "hour_of",
    "open_storage",
]


def __getattr__(name: str) -> Any:
    if name == "RedisStorage":
        from judgefuse.service.storage.redis import RedisStorage

        return RedisStorage
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_storage(url: str) -> Storage:
    """A storage from a URL: ``redis://`` / ``rediss://`` -> Redis, ``sqlite:///path`` or a
    plain path -> SQLite. The result is not opened yet (``await storage.open()``)."""
    if url.startswith(("redis://", "rediss://", "unix://")):
        from judgefuse.service.storage.redis import RedisStorage

        return RedisStorage(url)
    if url.startswith("sqlite:///"):
        return SQLiteStorage(url[len("sqlite:///") :])
    if "://" in url:
        raise ValueError(
            "storage url must be redis://, rediss://, unix://, sqlite:///path or a path"
        )
    return SQLiteStorage(url)
