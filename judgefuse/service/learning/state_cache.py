"""The gateway's per-(tenant, panel) cache of routing state: latest threshold, promoted model.

Every verdict needs both (the model to fuse, the threshold to route), and reading them from
the store on every request would put two storage round trips on the hot path. So each is
cached per (tenant, panel) for ``settings.learning.state_ttl_s``: a write through this gateway updates
its cache at once (:meth:`StateCache.store_threshold`, :meth:`StateCache.drop_model`); other
replicas see it within the TTL. A restored learned model is kept per (tenant, panel, version),
so a TTL expiry that finds the same version does not restore (unpickle, rebuild) it again.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from judgefuse.fusion.capabilities import LEARNED_METHOD, restore_method
from judgefuse.service.learning.promotion import is_retired
from judgefuse.service.settings import Settings
from judgefuse.service.storage import ModelRecord, ThresholdRecord, VersionedRecords

__all__ = ["StateCache"]


@dataclass
class _Cached:
    value: Any
    at: float


class StateCache:
    """Thresholds and restored models of one gateway, each fresh for ``state_ttl_s``."""

    def __init__(self, settings: Settings, storage: VersionedRecords) -> None:
        self.settings = settings
        self.storage = storage
        self._thresholds: dict[tuple[str, str], _Cached] = {}
        self._models: dict[tuple[str, str], _Cached] = {}
        self._restored: dict[tuple[str, str, int], Any] = {}

    def _fresh(self, cache: dict[tuple[str, str], _Cached], key: tuple[str, str]) -> _Cached | None:
        entry = cache.get(key)
        if entry is not None and time.monotonic() - entry.at <= self.settings.learning.state_ttl_s:
            return entry
        return None

    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None:
        key = (tenant, panel)
        entry = self._fresh(self._thresholds, key)
        if entry is None:
            entry = _Cached(await self.storage.get_threshold(tenant, panel), time.monotonic())
            self._thresholds[key] = entry
        return entry.value

    async def model(self, tenant: str, panel: str) -> tuple[ModelRecord, Any] | None:
        """The promoted learned model of (tenant, panel), restored by its method, or None."""
        key = (tenant, panel)
        entry = self._fresh(self._models, key)
        if entry is None:
            record = await self.storage.get_model(tenant, panel)
            value = None
            if record is not None and record.version is not None and not is_retired(record):
                rkey = (tenant, panel, record.version)
                restored = self._restored.get(rkey)
                if restored is None:
                    # in a thread: the first model a gateway serves imports its method's modules
                    # (sklearn, ~1-2 s); on the loop that held every request once a refit promoted
                    restored = await asyncio.to_thread(restore_method, record.method or LEARNED_METHOD,
                                                       record.params)
                    self._restored = {k: v for k, v in self._restored.items() if k[:2] != key}
                    self._restored[rkey] = restored
                value = (record, restored)
            entry = _Cached(value, time.monotonic())
            self._models[key] = entry
        return entry.value

    def store_threshold(self, tenant: str, panel: str, record: ThresholdRecord | None) -> None:
        """This gateway just stored ``record``: serve it from now on, without waiting the TTL."""
        self._thresholds[(tenant, panel)] = _Cached(record, time.monotonic())

    def drop_model(self, tenant: str, panel: str) -> None:
        """This gateway just promoted a model: the next read fetches (and restores) it."""
        self._models.pop((tenant, panel), None)
