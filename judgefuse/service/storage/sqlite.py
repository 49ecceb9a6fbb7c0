"""SQLite storage: the embedded default, one database file.

Durability and concurrency
--------------------------
* WAL journal mode; ``synchronous=FULL`` by default, so a write that was acknowledged (the
  awaited call returned) is in the file and survives a kill of the process or the machine.
  ``synchronous="NORMAL"`` is faster and still survives a process kill, but a power loss may
  drop the last transactions; pass it only when that is acceptable.
* Every sqlite3 call runs on one dedicated worker thread that owns the connection, so the event
  loop never blocks and calls from one process are serialised.
* Every write is one transaction opened with ``BEGIN IMMEDIATE`` (the write lock is taken
  before anything is read), so the read-check-write of ``set_label`` and the version numbering
  of thresholds and models are atomic also against other processes on the same file; they wait
  up to ``busy_timeout_s`` for the lock, then raise :class:`StorageUnavailable`.
* A cancelled awaiting task does not cancel the work already handed to the thread: the
  transaction either commits or rolls back as a whole.

Schema (created on open)
------------------------
``verdicts(tenant, id, panel, created_at, label, labelled_at, body)`` with primary key
(tenant, id) and partial indexes over labelled rows on (tenant, created_at, id) and (tenant,
panel, created_at, id), so ``iter_labelled`` and ``count_labelled`` scan only labelled rows, in
order; ``body`` is the record's JSON.
``acc_total(tenant, key, field, value)`` and ``acc_hour(tenant, key, hour, field, value)`` hold
the accumulators (``value`` has no declared type, so integers stay exact 64-bit integers and
floats stay floats; an integer sum that would leave int64, which SQLite would silently turn
into a REAL, is refused as :class:`AccumulatorOverflow` and the label rolled back); ``thresholds`` and ``models`` hold (tenant, panel, version, created_at, body).

Accumulator read cache
----------------------
A window read sums every hour bucket in the window (24 h of a busy accumulator is tens of
thousands of rows, tens of ms). :meth:`SQLiteStorage.read_accumulator` keeps its recent answers
(all time and windows; a bounded LRU) and reuses one only while it is provably still exact:

* ``PRAGMA data_version`` of this connection has not moved, i.e. no *other* connection (another
  process or handle on the file) has committed anything since the answer was read; and
* this handle has not itself labelled anything under that (tenant, key) since (``set_label``
  drops the cached answers of the keys it wrote, on the worker thread, after its transaction).

The version is read before the rows, so a cached answer is never older than the version it is
filed under. A reused answer is a fresh copy of exactly what the query returned.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from judgefuse.judges.types import Letter
from judgefuse.service.storage.base import (
    INT64_MAX,
    AccumulatorOverflow,
    IncrementsFn,
    Number,
    Storage,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictNotFound,
    check_limit,
    check_name,
    check_tenant,
    check_verdict_record,
    check_versioned,
    hour_of,
    labelled_copy,
    net_increments,
)
from judgefuse.service.storage.records import (
    LabelOutcome,
    ModelRecord,
    ThresholdRecord,
    VerdictRecord,
)

T = TypeVar("T")
V = TypeVar("V", ThresholdRecord, ModelRecord)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS verdicts (
    tenant TEXT NOT NULL,
    id TEXT NOT NULL,
    panel TEXT NOT NULL,
    created_at REAL NOT NULL,
    label TEXT,
    labelled_at REAL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, id)
);
CREATE INDEX IF NOT EXISTS verdicts_panel_labelled
    ON verdicts (tenant, panel, created_at, id) WHERE label IS NOT NULL;
CREATE INDEX IF NOT EXISTS verdicts_labelled
    ON verdicts (tenant, created_at, id) WHERE label IS NOT NULL;
CREATE TABLE IF NOT EXISTS acc_total (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    field TEXT NOT NULL,
    value NOT NULL,
    PRIMARY KEY (tenant, key, field)
);
CREATE TABLE IF NOT EXISTS acc_hour (
    tenant TEXT NOT NULL,
    key TEXT NOT NULL,
    hour INTEGER NOT NULL,
    field TEXT NOT NULL,
    value NOT NULL,
    PRIMARY KEY (tenant, key, hour, field)
);
CREATE TABLE IF NOT EXISTS thresholds (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
CREATE TABLE IF NOT EXISTS models (
    tenant TEXT NOT NULL,
    panel TEXT NOT NULL,
    version INTEGER NOT NULL,
    created_at REAL NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (tenant, panel, version)
);
"""

_ACC_CACHE_SIZE = 128
"""Accumulator answers kept per handle (see "Accumulator read cache" above)."""

_CORRUPT_MARKERS = ("not a database", "malformed", "corrupt")
_UNAVAILABLE_MARKERS = ("locked", "busy", "unable to open", "disk i/o", "readonly", "read-only")


def _map_sqlite_error(exc: sqlite3.Error, what: str) -> StorageError:
    text = str(exc).lower()
    if any(marker in text for marker in _CORRUPT_MARKERS):
        return StorageCorrupt(f"sqlite: {what}: {exc}")
    if isinstance(exc, sqlite3.OperationalError) and any(m in text for m in _UNAVAILABLE_MARKERS):
        return StorageUnavailable(f"sqlite: {what}: {exc}")
    return StorageError(f"sqlite: {what}: {type(exc).__name__}: {exc}")


def _check_overflow(key: str, field: str, delta: Number, result: Number) -> None:
    """SQLite turns an overflowing integer sum into a REAL: refuse it (the caller rolls back)."""
    limit = float(INT64_MAX) if isinstance(delta, int) else 1e300
    if abs(result) >= limit:
        raise AccumulatorOverflow(f"accumulator {key!r} field {field!r} would overflow")


class SQLiteStorage(Storage):
    """Storage in one SQLite file (see the module docstring for durability and atomicity)."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        busy_timeout_s: float = 5.0,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError("synchronous must be 'FULL' or 'NORMAL'")
        self.path = Path(path)
        self.synchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        # (tenant, key, low, high) -> (data_version, answer); touched only on the worker thread
        self._acc_cache: OrderedDict[tuple[str, str, int | None, int | None], tuple[int, dict[str, Number]]] = (
            OrderedDict()
        )

    # -- plumbing ------------------------------------------------------------------------------
    async def _run(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._executor is None:
            raise StorageError("sqlite storage is not open")

        def call() -> T:
            conn = self._conn
            if conn is None:
                raise StorageError("sqlite storage is not open")
            try:
                return fn(conn)
            except sqlite3.Error as exc:
                raise _map_sqlite_error(exc, what) from exc

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, call)

    @staticmethod
    def _write(conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` in one ``BEGIN IMMEDIATE`` transaction; roll back on any exception."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    # -- lifecycle -----------------------------------------------------------------------------
    async def open(self) -> None:
        if self._executor is not None:
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judgefuse-sqlite")

        def connect() -> None:
            conn = sqlite3.connect(
                self.path,
                timeout=self.busy_timeout_s,
                isolation_level=None,  # autocommit; transactions are explicit BEGIN IMMEDIATE
                check_same_thread=False,  # only the worker thread ever touches it
            )
            try:
                conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(f"sqlite: could not switch {self.path} to WAL ({mode})")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("BEGIN IMMEDIATE")
                try:
                    # not executescript: it would commit; the schema goes in as one transaction
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    row = conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()
                    if row is None:
                        conn.execute(
                            "INSERT INTO meta (name, value) VALUES ('schema', ?)",
                            (str(SCHEMA_VERSION),),
                        )
                    elif int(row[0]) > SCHEMA_VERSION:
                        raise StorageError(
                            f"sqlite: {self.path} has schema {row[0]}, newer than this code "
                            f"({SCHEMA_VERSION})"
                        )
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except BaseException:
                conn.close()
                raise
            self._conn = conn

        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, self._guard(connect, "open"))
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _guard(self, fn: Callable[[], T], what: str) -> Callable[[], T]:
        def call() -> T:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise _map_sqlite_error(exc, what) from exc

        return call

    async def close(self) -> None:
        executor = self._executor
        if executor is None:
            return

        def shut() -> None:
            self._acc_cache.clear()
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(executor, self._guard(shut, "close"))
        finally:
            self._executor = None
            executor.shutdown(wait=True)

    async def ping(self) -> bool:
        try:
            return await self._run("ping", lambda c: c.execute("SELECT 1").fetchone()[0] == 1)
        except StorageError:
            return False

    # -- verdicts ------------------------------------------------------------------------------
    async def save_verdict(self, tenant: str, record: VerdictRecord) -> None:
        check_verdict_record(tenant, record)
        body = record.model_dump_json()

        def txn(conn: sqlite3.Connection) -> None:
            row = conn.execute(
                "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, record.id)
            ).fetchone()
            if row is not None:
                if row[0] == body:
                    return
                raise VerdictExists(tenant, record.id)
            conn.execute(
                "INSERT INTO verdicts (tenant, id, panel, created_at, label, labelled_at, body) "
                "VALUES (?, ?, ?, ?, NULL, NULL, ?)",
                (tenant, record.id, record.panel, record.created_at, body),
            )

        await self._run("save_verdict", lambda c: self._write(c, txn))

    @staticmethod
    def _parse_record(body: str) -> VerdictRecord:
        try:
            return VerdictRecord.model_validate_json(body)
        except ValidationError as exc:
            raise StorageCorrupt(
                f"sqlite: stored verdict record is invalid ({exc.error_count()} errors)"
            ) from exc

    async def get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        check_tenant(tenant)
        check_name("verdict id", verdict_id)

        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, verdict_id)
            ).fetchone()
            return None if row is None else row[0]

        body = await self._run("get_verdict", read)
        return None if body is None else self._parse_record(body)

    # -- labels --------------------------------------------------------------------------------
    async def set_label(
        self,
        tenant: str,
        verdict_id: str,
        label: Letter,
        increments: IncrementsFn,
        *,
        labelled_at: float | None = None,
    ) -> LabelOutcome:
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        if label not in ("A", "B"):
            raise ValueError(f"label must be 'A' or 'B', got {label!r}")
        when = time.time() if labelled_at is None else float(labelled_at)

        def txn(conn: sqlite3.Connection) -> LabelOutcome:
            row = conn.execute(
                "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, verdict_id)
            ).fetchone()
            if row is None:
                raise VerdictNotFound(tenant, verdict_id)
            record = self._parse_record(row[0])
            if record.label == label:
                return LabelOutcome(status="unchanged", label=label, previous=label, record=record)
            net = net_increments(record, label, increments)
            new = labelled_copy(record, label, when)
            conn.execute(
                "UPDATE verdicts SET label = ?, labelled_at = ?, body = ? "
                "WHERE tenant = ? AND id = ?",
                (label, when, new.model_dump_json(), tenant, verdict_id),
            )
            hour = hour_of(record.created_at)
            touched.update(net)
            for key, fields in net.items():
                for field, delta in fields.items():
                    total = conn.execute(
                        "INSERT INTO acc_total (tenant, key, field, value) VALUES (?, ?, ?, ?) "
                        "ON CONFLICT (tenant, key, field) "
                        "DO UPDATE SET value = value + excluded.value RETURNING value",
                        (tenant, key, field, delta),
                    ).fetchone()[0]
                    bucket = conn.execute(
                        "INSERT INTO acc_hour (tenant, key, hour, field, value) "
                        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (tenant, key, hour, field) "
                        "DO UPDATE SET value = value + excluded.value RETURNING value",
                        (tenant, key, hour, field, delta),
                    ).fetchone()[0]
                    _check_overflow(key, field, delta, total)
                    _check_overflow(key, field, delta, bucket)
                    written.append((key, field, delta, total))
            written_hour.append(hour)
            return LabelOutcome(
                status="labelled" if record.label is None else "relabelled",
                label=label,
                previous=record.label,
                record=new,
                applied=net,
            )

        touched: set[str] = set()
        written: list[tuple[str, str, Number, Number]] = []  # (key, field, delta, new total)
        written_hour: list[int] = []

        def write(conn: sqlite3.Connection) -> LabelOutcome:
            try:
                outcome = self._write(conn, txn)
            except BaseException:  # rolled back; drop the cached answers of the keys it touched
                if touched:
                    self._drop_cached(tenant, touched)
                raise
            if written:
                self._update_cached(tenant, written_hour[0], written)
            return outcome

        return await self._run("set_label", write)

    def _drop_cached(self, tenant: str, keys: set[str]) -> None:
        for entry in [e for e in self._acc_cache if e[0] == tenant and e[1] in keys]:
            del self._acc_cache[entry]

    def _update_cached(
        self, tenant: str, hour: int, written: list[tuple[str, str, Number, Number]]
    ) -> None:
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
        cache = self._acc_cache
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

    # -- accumulators --------------------------------------------------------------------------
    async def read_accumulator(
        self,
        tenant: str,
        key: str,
        *,
        since_hour: int | None = None,
        until_hour: int | None = None,
    ) -> dict[str, Number]:
        check_tenant(tenant)
        check_name("accumulator key", key)

        entry = (
            tenant,
            key,
            None if since_hour is None else int(since_hour),
            None if until_hour is None else int(until_hour),
        )

        def read(conn: sqlite3.Connection) -> dict[str, Number]:
            cache = self._acc_cache
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            hit = cache.get(entry)
            if hit is not None and hit[0] == version:
                cache.move_to_end(entry)
                return dict(hit[1])
            if since_hour is None and until_hour is None:
                rows = conn.execute(
                    "SELECT field, value FROM acc_total WHERE tenant = ? AND key = ?",
                    (tenant, key),
                ).fetchall()
            else:
                low = -(2**62) if since_hour is None else int(since_hour)
                high = 2**62 if until_hour is None else int(until_hour)
                rows = conn.execute(
                    "SELECT field, SUM(value) FROM acc_hour WHERE tenant = ? AND key = ? "
                    "AND hour >= ? AND hour < ? GROUP BY field",
                    (tenant, key, low, high),
                ).fetchall()
            answer = {field: value for field, value in rows}
            cache[entry] = (version, answer)
            cache.move_to_end(entry)
            while len(cache) > _ACC_CACHE_SIZE:
                cache.popitem(last=False)
            return dict(answer)

        return await self._run("read_accumulator", read)

    async def list_accumulators(self, tenant: str, prefix: str = "") -> list[str]:
        check_tenant(tenant)

        def read(conn: sqlite3.Connection) -> list[str]:
            # A skip scan over the (tenant, key, field) index: one seek per distinct key instead
            # of a pass over every field row. Keys with the prefix are contiguous from the first
            # key >= prefix (BINARY order), so the walk stops at the first key without it.
            rows = conn.execute(
                "WITH RECURSIVE k(key) AS ("
                " SELECT MIN(key) FROM acc_total WHERE tenant = ?1 AND key >= ?3"
                " UNION ALL"
                " SELECT (SELECT MIN(key) FROM acc_total WHERE tenant = ?1 AND key > k.key)"
                " FROM k WHERE k.key IS NOT NULL AND substr(k.key, 1, ?2) = ?3"
                ") SELECT key FROM k WHERE key IS NOT NULL AND substr(key, 1, ?2) = ?3",
                (tenant, len(prefix), prefix),
            ).fetchall()
            return [row[0] for row in rows]

        keys = await self._run("list_accumulators", read)
        return sorted(keys)  # Python's code-point order, the same as Redis's byte order for UTF-8

    # -- versioned records ---------------------------------------------------------------------
    async def _put_versioned(self, table: str, tenant: str, panel: str, record: V) -> int:
        check_tenant(tenant)
        check_versioned(panel, record)
        body = record.model_dump_json(exclude={"version"})

        def txn(conn: sqlite3.Connection) -> int:
            row = conn.execute(
                f"SELECT COALESCE(MAX(version), 0) FROM {table} WHERE tenant = ? AND panel = ?",
                (tenant, panel),
            ).fetchone()
            version = int(row[0]) + 1
            conn.execute(
                f"INSERT INTO {table} (tenant, panel, version, created_at, body) "
                "VALUES (?, ?, ?, ?, ?)",
                (tenant, panel, version, record.created_at, body),
            )
            return version

        return await self._run(f"put {table}", lambda c: self._write(c, txn))

    @staticmethod
    def _parse_versioned(model_cls: type[V], version: int, body: str) -> V:
        try:
            data: Any = json.loads(body)
            data["version"] = version
            return model_cls.model_validate(data)
        except (ValueError, TypeError) as exc:  # ValidationError is a ValueError
            raise StorageCorrupt(f"sqlite: stored {model_cls.__name__} is invalid") from exc

    async def _get_versioned(
        self, table: str, cls: type[V], tenant: str, panel: str, version: int | None
    ) -> V | None:
        check_tenant(tenant)
        check_name("panel", panel)

        def read(conn: sqlite3.Connection) -> tuple[int, str] | None:
            if version is None:
                sql = (
                    f"SELECT version, body FROM {table} WHERE tenant = ? AND panel = ? "
                    "ORDER BY version DESC LIMIT 1"
                )
                return conn.execute(sql, (tenant, panel)).fetchone()
            sql = (
                f"SELECT version, body FROM {table} "
                "WHERE tenant = ? AND panel = ? AND version = ?"
            )
            return conn.execute(sql, (tenant, panel, int(version))).fetchone()

        row = await self._run(f"get {table}", read)
        return None if row is None else self._parse_versioned(cls, int(row[0]), row[1])

    async def _history(self, table: str, cls: type[V], tenant: str, panel: str) -> list[V]:
        check_tenant(tenant)
        check_name("panel", panel)
        rows = await self._run(
            f"{table} history",
            lambda c: c.execute(
                f"SELECT version, body FROM {table} WHERE tenant = ? AND panel = ? "
                "ORDER BY version",
                (tenant, panel),
            ).fetchall(),
        )
        return [self._parse_versioned(cls, int(v), body) for v, body in rows]

    async def put_threshold(self, tenant: str, panel: str, record: ThresholdRecord) -> int:
        return await self._put_versioned("thresholds", tenant, panel, record)

    async def get_threshold(
        self, tenant: str, panel: str, *, version: int | None = None
    ) -> ThresholdRecord | None:
        return await self._get_versioned("thresholds", ThresholdRecord, tenant, panel, version)

    async def threshold_history(self, tenant: str, panel: str) -> list[ThresholdRecord]:
        return await self._history("thresholds", ThresholdRecord, tenant, panel)

    async def put_model(self, tenant: str, panel: str, record: ModelRecord) -> int:
        return await self._put_versioned("models", tenant, panel, record)

    async def get_model(
        self, tenant: str, panel: str, *, version: int | None = None
    ) -> ModelRecord | None:
        return await self._get_versioned("models", ModelRecord, tenant, panel, version)

    async def model_history(self, tenant: str, panel: str) -> list[ModelRecord]:
        return await self._history("models", ModelRecord, tenant, panel)

    # -- labelled records ----------------------------------------------------------------------
    async def iter_labelled(
        self, tenant: str, panel: str | None = None, *, limit: int | None = None
    ) -> list[VerdictRecord]:
        check_tenant(tenant)
        check_limit(limit)
        if panel is not None:
            check_name("panel", panel)
        sql = "SELECT body FROM verdicts WHERE tenant = ? AND label IS NOT NULL"
        params: list[Any] = [tenant]
        if panel is not None:
            sql += " AND panel = ?"
            params.append(panel)
        sql += " ORDER BY created_at DESC, id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(limit)
        rows = await self._run("iter_labelled", lambda c: c.execute(sql, params).fetchall())
        return [self._parse_record(row[0]) for row in rows]

    async def count_labelled(self, tenant: str, panel: str | None = None) -> int:
        check_tenant(tenant)
        sql = "SELECT COUNT(*) FROM verdicts WHERE tenant = ? AND label IS NOT NULL"
        params: list[Any] = [tenant]
        if panel is not None:
            check_name("panel", panel)
            sql += " AND panel = ?"
            params.append(panel)
        row = await self._run("count_labelled", lambda c: c.execute(sql, params).fetchone())
        return int(row[0])
