"""SQLite storage: the embedded default, one database file.

Durability and concurrency
--------------------------
* WAL journal mode; ``synchronous=FULL`` by default, so a write that was acknowledged (the
  awaited call returned) is in the file and survives a kill of the process or the machine.
  ``synchronous="NORMAL"`` is faster and still survives a process kill, but a power loss may
  drop the last transactions; pass it only when that is acceptable.
* Every sqlite3 call runs on one dedicated worker thread that owns the connection, so the event
  loop never blocks and calls from one process are serialised.
* Verdict saves and labels are group-committed (:mod:`.group_commit`): the ones that
  queue up while a commit is running share the next transaction, each in its own savepoint (one
  write's error is its caller's alone), and each caller returns only after that transaction
  committed; so durability is as above, with one fsync per group instead of per write.
* Every write is one transaction opened with ``BEGIN IMMEDIATE`` (the write lock is taken
  before anything is read), so the read-check-write of ``set_label`` and the version numbering
  of thresholds and models are atomic also against other processes on the same file; they wait
  up to ``busy_timeout_s`` for the lock, then raise :class:`StorageUnavailable`.
* A cancelled awaiting task does not cancel the work already handed to the thread: the
  transaction either commits or rolls back as a whole.

Layout
------
This module is the connection, its worker thread, transactions and error mapping, and the
verdict and label queries. The rest, one job each:

* :mod:`~judgefuse.service.storage.sqlite.schema`: the tables and creating them on open;
* :mod:`~judgefuse.service.storage.sqlite.accumulators`: the accumulator statements;
* :mod:`~judgefuse.service.storage.sqlite.review`: the review queue, its leases and counters
  (enqueued in ``save_verdict``'s transaction, dequeued in ``set_label``'s, leases taken in one
  ``BEGIN IMMEDIATE``, so two annotators, even in two processes, never hold one item);
* :mod:`~judgefuse.service.storage.sqlite.cache`: the accumulator read cache (answers reused
  while ``PRAGMA data_version`` proves them exact);
* :mod:`~judgefuse.service.storage.sqlite.versioned`: thresholds and models.
"""

from __future__ import annotations

import asyncio
import functools
import sqlite3
from collections.abc import AsyncGenerator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from judgefuse.service.storage import sql as shared_sql
from judgefuse.service.storage.base import Storage
from judgefuse.service.storage.checks import (
    Increments,
    IncrementsFn,
    Number,
    V,
    VersionedKind,
    hour_of,
    label_status,
    label_unchanged,
    labelled_copy,
    net_increments,
    parse_record,
    parse_records,
    parse_state,
    parse_versioned,
    unlabelled_copy,
)
from judgefuse.service.storage.errors import (
    StorageCorrupt,
    StorageError,
    VerdictExists,
    VerdictNotFound,
)
from judgefuse.service.storage.label_history import LabelEvent, event_body
from judgefuse.service.storage.paging import PageSizer
from judgefuse.service.storage.records import (
    LabelKind,
    LabelOutcome,
    ModelRecord,
    ReviewLease,
    ServingVersions,
    StateBlob,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.retention import RetentionReport
from judgefuse.service.storage.sql import VERSIONED_TABLES
from judgefuse.service.storage.sqlite.accumulators import (
    accumulator_keys,
    add_increments,
    sum_accumulator,
)
from judgefuse.service.storage.sqlite.cache import AccumulatorCache, Written
from judgefuse.service.storage.sqlite.checkpointer import BACKSTOP_PAGES, Checkpointer
from judgefuse.service.storage.sqlite.errors import map_sqlite_error
from judgefuse.service.storage.sqlite.group_commit import GroupCommit
from judgefuse.service.storage.sqlite.label_history import append_history, read_history
from judgefuse.service.storage.sqlite.retention import (
    Bounds,
    Key,
    create_retention_indexes,
    incremental_vacuum,
    prepare_new_file,
    record_page,
    retention_batch,
)
from judgefuse.service.storage.sqlite.review import (
    dequeue_labelled,
    enqueue_new,
    lease_free,
    release_lease,
    requeue_undone,
)
from judgefuse.service.storage.sqlite.review import stats as review_stats_of
from judgefuse.service.storage.sqlite.schema import SCHEMA_VERSION, create_schema
from judgefuse.service.storage.sqlite.versioned import (
    insert_next_version,
    latest_version,
    select_history,
    select_version,
)
from judgefuse.service.storage.verdict_query import VerdictCursor

T = TypeVar("T")
_RECENT = shared_sql.for_sqlite(shared_sql.RECENT)
_RELEASE_LEASE = shared_sql.for_sqlite(shared_sql.RELEASE_LEASE)
_GET_STATE = shared_sql.for_sqlite(shared_sql.GET_STATE)

__all__ = ["SCHEMA_VERSION", "SQLiteStorage"]

def _record_in(conn: sqlite3.Connection, tenant: str, verdict_id: str) -> VerdictRecord:
    """The record a label or an undo changes, read inside its write transaction."""
    row = conn.execute(
        "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, verdict_id)
    ).fetchone()
    if row is None:
        raise VerdictNotFound(tenant, verdict_id)
    return parse_record(row[0], "sqlite")


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
        # touched only on the worker thread
        self._acc_cache = AccumulatorCache()
        self.group_commit = GroupCommit(lambda: self._executor, lambda: self._conn)
        """Verdict saves and labels: one transaction per group of concurrent writes."""
        self.checkpointer = Checkpointer(self.path, synchronous=self.synchronous,
                                         busy_timeout_s=self.busy_timeout_s)
        """Copies the WAL back into the file beside the commits, not inside one of them."""

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
                raise map_sqlite_error(exc, what) from exc

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
                prepare_new_file(conn)  # before WAL and the first table (.retention)
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(f"sqlite: could not switch {self.path} to WAL ({mode})")
                conn.execute(f"PRAGMA synchronous = {self.synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute(f"PRAGMA wal_autocheckpoint = {BACKSTOP_PAGES}")  # see .checkpointer
                create_schema(conn, self.path)
                create_retention_indexes(conn)
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
        self.checkpointer.start()

    def _guard(self, fn: Callable[[], T], what: str) -> Callable[[], T]:
        def call() -> T:
            try:
                return fn()
            except sqlite3.Error as exc:
                raise map_sqlite_error(exc, what) from exc

        return call

    async def close(self) -> None:
        executor = self._executor
        if executor is None:
            return
        await asyncio.to_thread(self.checkpointer.stop)

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

    def reopen_url(self) -> str | None:
        return f"sqlite:///{self.path.resolve()}"

    async def ping(self) -> bool:
        try:
            return await self._run("ping", lambda c: c.execute("SELECT 1").fetchone()[0] == 1)
        except StorageError:
            return False

    # -- verdicts ------------------------------------------------------------------------------
    async def _save_verdict(self, tenant: str, record: VerdictRecord, net: Increments) -> None:
        body = record.model_dump_json()
        hour = hour_of(record.created_at)

        def txn(conn: sqlite3.Connection) -> None:
            inserted = conn.execute(
                "INSERT INTO verdicts (tenant, id, panel, created_at, label, labelled_at, body) "
                "VALUES (?, ?, ?, ?, NULL, NULL, ?) ON CONFLICT (tenant, id) DO NOTHING",
                (tenant, record.id, record.panel, record.created_at, body),
            ).rowcount
            if not inserted:  # the id is taken (one statement in the usual case, not two)
                row = conn.execute(
                    "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, record.id)
                ).fetchone()
                if row is not None and row[0] == body:
                    return  # a retried save: no second enqueue, no second increment
                raise VerdictExists(tenant, record.id)
            enqueue_new(conn, tenant, record)
            if net:
                add_increments(conn, tenant, hour, net, written)

        written: Written = []
        await self._write_grouped("save_verdict", tenant, [hour], set(net), written, txn)

    async def _write_grouped(
        self,
        what: str,
        tenant: str,
        hour: list[int],
        touched: set[str],
        written: Written,
        txn: Callable[[sqlite3.Connection], T],
    ) -> T:
        """``txn`` as one write of the next group commit (:mod:`.group_commit`), which
        returns once the group's transaction committed. It may add accumulator increments: on
        commit the read cache takes what was ``written`` (into the hour bucket ``hour[0]``,
        which ``txn`` may fill in); when it did not commit, the cache forgets the ``touched``
        keys (answers about them may no longer be exact)."""

        def committed() -> None:
            if written:
                self._acc_cache.update(tenant, hour[0], written)

        def undone() -> None:
            if touched:
                self._acc_cache.drop(tenant, touched)

        return await self.group_commit.write(what, txn, committed=committed, undone=undone)

    async def _get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        def read(conn: sqlite3.Connection) -> str | None:
            row = conn.execute(
                "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, verdict_id)
            ).fetchone()
            return None if row is None else row[0]

        body = await self._run("get_verdict", read)
        return None if body is None else parse_record(body, "sqlite")

    # -- labels --------------------------------------------------------------------------------
    async def _set_label(
        self, tenant: str, verdict_id: str, label: LabelKind, increments: IncrementsFn, when: float,
        comment: str | None = None, *, by: str | None = None,
    ) -> LabelOutcome:
        def txn(conn: sqlite3.Connection) -> LabelOutcome:
            record = _record_in(conn, tenant, verdict_id)
            if label_unchanged(record, label, comment):
                return LabelOutcome(status="unchanged", label=label, previous=label, record=record)
            net = net_increments(record, label, increments)
            new = labelled_copy(record, label, when, comment)
            hour = hour_of(record.created_at)
            hour_box.append(hour)
            conn.execute(
                "UPDATE verdicts SET label = ?, labelled_at = ?, body = ? "
                "WHERE tenant = ? AND id = ?",
                (label, when, new.model_dump_json(), tenant, verdict_id),
            )
            append_history(conn, tenant, verdict_id, event_body(
                record, label_status(record, label), label, when, comment, by))
            touched.update(net)
            add_increments(conn, tenant, hour, net, written)
            dequeue_labelled(conn, tenant, record)
            return LabelOutcome(
                status=label_status(record, label),
                label=label,
                previous=record.label,
                record=new,
                applied=net,
            )

        touched: set[str] = set()
        written: Written = []  # (key, field, delta, new total)
        hour_box: list[int] = []

        return await self._write_grouped("set_label", tenant, hour_box, touched, written, txn)

    async def _undo_label(
        self, tenant: str, verdict_id: str, increments: IncrementsFn, labelled_at: float,
        annotator: str, at: float, expires_at: float,
    ) -> VerdictRecord | None:
        def txn(conn: sqlite3.Connection) -> VerdictRecord | None:
            record = _record_in(conn, tenant, verdict_id)
            if record.label is None or record.labelled_at != labelled_at:
                return None
            net = net_increments(record, None, increments)
            new = unlabelled_copy(record)
            hour = hour_of(record.created_at)
            hour_box.append(hour)
            conn.execute(
                "UPDATE verdicts SET label = NULL, labelled_at = NULL, body = ? "
                "WHERE tenant = ? AND id = ?",
                (new.model_dump_json(), tenant, verdict_id),
            )
            append_history(conn, tenant, verdict_id,
                           event_body(record, None, None, at, None, annotator))
            touched.update(net)
            add_increments(conn, tenant, hour, net, written)
            requeue_undone(conn, tenant, record, annotator, expires_at)
            return new

        touched: set[str] = set()
        written: Written = []
        hour_box: list[int] = []

        return await self._write_grouped("undo_label", tenant, hour_box, touched, written, txn)

    async def _label_history(self, tenant: str, verdict_id: str) -> list[LabelEvent]:
        return await self._run("label_history", lambda c: read_history(c, tenant, verdict_id))

    # -- review queue --------------------------------------------------------------------------
    async def _lease_review(
        self, tenant: str, panel: str, n: int, annotator: str, at: float, expires_at: float
    ) -> list[ReviewLease]:
        def txn(conn: sqlite3.Connection) -> list[str]:
            ids = lease_free(conn, tenant, panel, n, annotator, at, expires_at)
            bodies = []
            for vid in ids:
                row = conn.execute(
                    "SELECT body FROM verdicts WHERE tenant = ? AND id = ?", (tenant, vid)
                ).fetchone()
                if row is None:
                    raise StorageCorrupt(f"sqlite: queued verdict {vid!r} has no record")
                bodies.append(row[0])
            return bodies

        bodies = await self._run("lease_review", lambda c: self._write(c, txn))
        return [
            ReviewLease(
                record=parse_record(body, "sqlite"), annotator=annotator, lease_expires_at=expires_at
            )
            for body in bodies
        ]

    async def _release_review(self, tenant: str, verdict_id: str, annotator: str, at: float) -> bool:
        def txn(conn: sqlite3.Connection) -> bool:
            return release_lease(conn, tenant, verdict_id, annotator, at)

        return await self._run("release_review", lambda c: self._write(c, txn))

    async def _review_stats(self, tenant: str, panel: str, at: float) -> dict[str, StratumCounts]:
        def read(conn: sqlite3.Connection) -> dict[str, StratumCounts]:
            conn.execute("BEGIN")  # one snapshot for the counters and the live leases
            try:
                return review_stats_of(conn, tenant, panel, at)
            finally:
                conn.execute("COMMIT")

        return await self._run("review_stats", read)

    # -- named leases ----------------------------------------------------------------------------
    async def _acquire_lease(self, tenant: str, name: str, owner: str, ttl: float, at: float) -> bool:
        def txn(conn: sqlite3.Connection) -> bool:
            row = conn.execute(
                "SELECT owner, expires_at FROM leases WHERE tenant = ? AND name = ?", (tenant, name)
            ).fetchone()
            if row is not None and row[0] != owner and row[1] > at:
                return False
            conn.execute(
                "INSERT INTO leases (tenant, name, owner, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (tenant, name) DO UPDATE SET owner = excluded.owner, "
                "expires_at = excluded.expires_at",
                (tenant, name, owner, at + ttl),
            )
            return True

        return await self._run("acquire_lease", lambda c: self._write(c, txn))

    async def _release_lease(self, tenant: str, name: str, owner: str) -> bool:
        def txn(conn: sqlite3.Connection) -> bool:
            return conn.execute(_RELEASE_LEASE, (tenant, name, owner)).rowcount == 1

        return await self._run("release_lease", lambda c: self._write(c, txn))

    # -- accumulators --------------------------------------------------------------------------
    async def _read_accumulator(
        self, tenant: str, key: str, since_hour: int | None, until_hour: int | None
    ) -> dict[str, Number]:
        entry = (
            tenant,
            key,
            None if since_hour is None else int(since_hour),
            None if until_hour is None else int(until_hour),
        )

        def read(conn: sqlite3.Connection) -> dict[str, Number]:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            hit = self._acc_cache.get(entry, version)
            if hit is not None:
                return hit
            answer = sum_accumulator(conn, tenant, key, since_hour, until_hour)
            return self._acc_cache.put(entry, version, answer)

        return await self._run("read_accumulator", read)

    async def _list_accumulators(self, tenant: str, prefix: str) -> list[str]:
        return await self._run("list_accumulators", lambda c: accumulator_keys(c, tenant, prefix))

    # -- versioned records ---------------------------------------------------------------------
    async def _put_versioned(self, kind: VersionedKind, tenant: str, panel: str, record: V) -> int:
        table = VERSIONED_TABLES[kind]
        body = record.model_dump_json(exclude={"version"})

        def txn(conn: sqlite3.Connection) -> int:
            return insert_next_version(conn, table, tenant, panel, record.created_at, body)

        return await self._run(f"put {table}", lambda c: self._write(c, txn))

    async def _put_serving(
        self, tenant: str, panel: str, expected: ServingVersions, threshold: ThresholdRecord | None,
        model: ModelRecord | None,
    ) -> ServingVersions | None:
        writes = [(VERSIONED_TABLES["threshold"], threshold), (VERSIONED_TABLES["model"], model)]

        def txn(conn: sqlite3.Connection) -> ServingVersions | None:
            # one BEGIN IMMEDIATE: the check and the inserts are one step, also across processes
            latest = [latest_version(conn, table, tenant, panel) for table, _record in writes]
            if latest != list(expected):
                return None
            return ServingVersions(*(
                v if record is None else insert_next_version(
                    conn, table, tenant, panel, record.created_at, record.model_dump_json(exclude={"version"}))
                for v, (table, record) in zip(latest, writes, strict=True)))

        return await self._run("put_serving", lambda c: self._write(c, txn))

    async def _get_versioned(
        self, kind: VersionedKind, cls: type[V], tenant: str, panel: str, version: int | None
    ) -> V | None:
        table = VERSIONED_TABLES[kind]
        row = await self._run(f"get {table}", lambda c: select_version(c, kind, tenant, panel, version))
        return None if row is None else parse_versioned(cls, int(row[0]), row[1], "sqlite")

    async def _history(self, kind: VersionedKind, cls: type[V], tenant: str, panel: str) -> list[V]:
        table = VERSIONED_TABLES[kind]
        rows = await self._run(f"{table} history", lambda c: select_history(c, kind, tenant, panel))
        return [parse_versioned(cls, int(v), body, "sqlite") for v, body in rows]

    # -- state blobs -----------------------------------------------------------------------------
    async def _get_state(self, tenant: str, key: str) -> StateBlob | None:
        row = await self._run("get_state", lambda c: c.execute(_GET_STATE, (tenant, key)).fetchone())
        return None if row is None else parse_state(row[0], row[1], key, "sqlite")

    async def _put_state(self, tenant: str, key: str, text: str, expected_version: int) -> int | None:

        def txn(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(
                "SELECT version FROM state_blobs WHERE tenant = ? AND key = ?", (tenant, key)
            ).fetchone()
            if (0 if row is None else int(row[0])) != expected_version:
                return None
            conn.execute(
                "INSERT INTO state_blobs (tenant, key, version, body) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (tenant, key) DO UPDATE SET version = excluded.version, "
                "body = excluded.body",
                (tenant, key, expected_version + 1, text),
            )
            return expected_version + 1

        return await self._run("put_state", lambda c: self._write(c, txn))

    # -- labelled records ----------------------------------------------------------------------
    async def _iter_labelled(
        self, tenant: str, panel: str | None, limit: int | None
    ) -> list[VerdictRecord]:
        sql, params = shared_sql.labelled(tenant, panel, limit, sqlite=True)
        rows = await self._run("iter_labelled", lambda c: c.execute(sql, params).fetchall())
        return await parse_records([row[0] for row in rows], "sqlite")

    async def _iter_recent(self, tenant: str, panel: str, limit: int) -> list[VerdictRecord]:
        rows = await self._run(
            "iter_recent", lambda c: c.execute(_RECENT, (tenant, panel, limit)).fetchall())
        return await parse_records([row[0] for row in rows], "sqlite")

    async def _scan_verdicts(
        self, tenant: str, panel: str, since: float | None, until: float | None,
        labelled: bool | None, before: VerdictCursor | None, limit: int, *,
        oldest_first: bool = False,
    ) -> list[VerdictRecord]:
        sql, params = shared_sql.verdict_scan(
            tenant, panel, since, until, labelled,
            None if before is None else (before.created_at, before.id), limit, sqlite=True,
            oldest_first=oldest_first)
        rows = await self._run("list_verdicts", lambda c: c.execute(sql, params).fetchall())
        return await parse_records([row[0] for row in rows], "sqlite")

    async def _count_labelled(self, tenant: str, panel: str | None) -> int:
        sql, params = shared_sql.count_labelled(tenant, panel, sqlite=True)
        row = await self._run("count_labelled", lambda c: c.execute(sql, params).fetchone())
        return int(row[0])

    # -- export and retention (.retention) -------------------------------------------------
    async def _iter_records(
        self, tenant: str | None, panel: str | None, since: float | None, until: float | None,
        labelled_only: bool, batch_size: int,
    ) -> AsyncGenerator[VerdictRecord, None]:
        after: Key | None = None
        sizer = PageSizer(batch_size)  # bounded by bytes too (storage/paging.py)
        while True:
            limit = sizer.rows
            page = functools.partial(
                record_page, tenant=tenant, panel=panel, since=since, until=until,
                labelled_only=labelled_only, after=after, batch=limit,
            )
            rows = await self._run("iter_records", page)
            sizer.observe(len(rows), sum(len(row[3]) for row in rows))
            # a page at a time, in a worker thread when large (checks.PARSE_OFF_LOOP_BYTES)
            for record in await parse_records([row[3] for row in rows], "sqlite"):
                yield record
            if len(rows) < limit:
                return
            after = (float(rows[-1][0]), str(rows[-1][1]), str(rows[-1][2]))

    async def _apply_retention(self, cutoff: float, keep: int) -> RetentionReport:
        bounds: Bounds = {}
        after: Key | None = None
        dropped = pending = labelled = 0
        while True:
            txn = functools.partial(
                retention_batch, older_than=cutoff, keep_labelled=keep, after=after, bounds=bounds
            )
            report, after = await self._run(
                "apply_retention", functools.partial(self._write, fn=txn)
            )
            dropped += report.dropped
            pending += report.kept_pending
            labelled += report.kept_labelled
            if after is None:
                break
        if dropped:
            while await self._run("incremental_vacuum", incremental_vacuum):
                pass
        return RetentionReport(dropped=dropped, kept_pending=pending, kept_labelled=labelled)

