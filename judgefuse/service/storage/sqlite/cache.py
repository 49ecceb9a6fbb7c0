"""The SQLite backend's accumulator read cache: recent answers, reused only while provably exact.

A window read sums every hour bucket in the window (24 h of a busy accumulator is tens of
thousands of rows, tens of ms). :meth:`SQLiteStorage.read_accumulator
<judgefuse.service.storage.sqlite.SQLiteStorage.read_accumulator>` keeps its recent answers
(all time and windows; a bounded LRU) and reuses one only while it is provably still exact:

* ``PRAGMA data_version`` of this connection has not moved, i.e. no *other* connection (another
  process or handle on the file) has committed anything since the answer was read; and
* this handle has not itself labelled anything under that (tenant, key) since (``set_label``
  drops the cached answers of the keys it wrote, on the worker thread, after its transaction).

The version is read before the rows, so a cached answer is never older than the version it is
filed under. A reused answer is a fresh copy of exactly what the query returned.

Not thread-safe: the storage touches it only on its one worker thread.
"""

from __future__ import annotations

from collections import OrderedDict

from judgefuse.service.storage.checks import INT64_MAX, Number

__all__ = ["ACC_CACHE_SIZE", "AccumulatorCache", "CacheKey", "Written"]

ACC_CACHE_SIZE = 128
"""Accumulator answers kept per handle (see the module docstring)."""

CacheKey = tuple[str, str, int | None, int | None]
"""(tenant, key, since_hour, until_hour) of one read; ``None`` bounds are open."""

Written = list[tuple[str, str, Number, Number]]
"""What one committed label wrote: (key, field, delta, new all-time total) per field."""


class AccumulatorCache:
    """A bounded LRU of accumulator answers, each filed under the ``data_version`` it was read at."""

    def __init__(self, size: int = ACC_CACHE_SIZE) -> None:
        self.size = size
        self._entries: OrderedDict[CacheKey, tuple[int, dict[str, Number]]] = OrderedDict()

    def get(self, entry: CacheKey, version: int) -> dict[str, Number] | None:
        """A copy of the answer cached for ``entry`` at ``version``, or None."""
        hit = self._entries.get(entry)
        if hit is not None and hit[0] == version:
            self._entries.move_to_end(entry)
            return dict(hit[1])
        return None

    def put(self, entry: CacheKey, version: int, answer: dict[str, Number]) -> dict[str, Number]:
        """File ``answer`` (read at ``version``) under ``entry``; return a copy of it."""
        cache = self._entries
        cache[entry] = (version, answer)
        cache.move_to_end(entry)
        while len(cache) > self.size:
            cache.popitem(last=False)
        return dict(answer)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def drop(self, tenant: str, keys: set[str]) -> None:
        """Forget every answer of ``keys`` under ``tenant`` (a write to them rolled back)."""
        for entry in [e for e in self._entries if e[0] == tenant and e[1] in keys]:
            del self._entries[entry]

    def update(self, tenant: str, hour: int, written: Written) -> None:
        """Bring the cached answers up to date after this handle committed ``written``.

        All-time answers take the stored totals (``RETURNING value``: exactly what a read would
        return). A window containing ``hour`` adds the deltas when they and the cached sums are
        all integers (exact, as SQL's integer ``SUM``); otherwise (a float, where summation order
        could change the last bit, or a sum past int64, where SQL's ``SUM`` raises) the answer is
        dropped and the next read queries again.
        """
        by_key: dict[str, list[tuple[str, Number, Number]]] = {}
        for key, field, delta, total in written:
            by_key.setdefault(key, []).append((field, delta, total))
        cache = self._entries
        for entry in [e for e in cache if e[0] == tenant and e[1] in by_key]:
            _, key, low, high = entry
            answer = cache[entry][1]
            rows = by_key[key]
            if low is None and high is None:
                for field, _delta, total in rows:
                    answer[field] = total
                continue
            if (low is not None and hour < low) or (high is not None and hour >= high):
                continue
            sums: list[tuple[str, int]] = []
            for field, delta, _total in rows:
                old = answer.get(field, 0)
                new_sum = old + delta if type(old) is int and type(delta) is int else None
                if new_sum is None or not -INT64_MAX - 1 <= new_sum <= INT64_MAX:
                    del cache[entry]
                    break
                sums.append((field, new_sum))
            else:
                answer.update(sums)
