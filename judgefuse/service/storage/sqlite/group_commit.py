"""Group commit for the SQLite backend: concurrent verdict and label writes share one transaction.

Why: with ``synchronous=FULL`` every commit waits for an fsync of the WAL (0.5-4 ms on the
machines measured, more under load), and the one worker thread that owns the connection does
nothing else meanwhile. One transaction per verdict therefore caps the gateway at one fsync per
verdict and queues every other write behind it. Here the writes that arrive while the worker is
busy wait in :class:`GroupCommit`'s queue and the next turn of the worker runs all of them (up
to ``max_batch``) in one ``BEGIN IMMEDIATE`` ... ``COMMIT``: one fsync for the group.

What does not change:

* **Durability.** A caller's ``await`` returns (its write is acknowledged) only after the
  ``COMMIT`` that holds it returned; nothing is acknowledged from an uncommitted batch. A write
  arriving when the worker is idle runs at once, alone: batching adds no wait of its own (the
  group is whatever queued up during the previous commit, i.e. "a few ms" of writes).
* **Isolation of outcomes.** Each write runs inside its own ``SAVEPOINT``: a write that raises
  (a duplicate verdict id -> ``VerdictExists``, a label for an unknown verdict, a constraint)
  is rolled back to its savepoint and its caller gets its own exception; the others of the
  group commit as if it had never run. Only a failure of the group itself (``BEGIN`` busy past
  the timeout, the ``COMMIT``'s I/O, SQLite dropping the transaction) fails the writes it held,
  each with that error, and none of them is then committed.
* **Cancellation.** A caller cancelled while waiting does not take its write out of the group:
  the write commits or rolls back with it, exactly as a write handed to the worker thread did.
* **Fairness with reads.** Each group is one job on the worker's executor; when more writes
  queued meanwhile, the next group is queued *behind* the reads that arrived in between, so a
  stream of writes never starves ``get_verdict`` or an accumulator read.

Each write may pass ``committed`` (run on the worker thread after the group's ``COMMIT``:
the accumulator read cache takes what it wrote) and ``undone`` (run when it did not commit:
the cache forgets what it touched). Both run in the group's order.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from judgefuse.service.storage.errors import StorageCorrupt, StorageError, StorageUnavailable
from judgefuse.service.storage.sqlite.errors import map_sqlite_error

__all__ = ["DEFAULT_MAX_BATCH", "GroupCommit"]

T = TypeVar("T")

_PLAIN = (StorageError, StorageUnavailable, StorageCorrupt)
"""Error classes built from a message alone (a write lost with another's takes its class)."""

DEFAULT_MAX_BATCH = 64
"""Writes per transaction at most: bounds the time a group holds the write lock."""


@dataclass(slots=True)
class _Write(Generic[T]):
    what: str
    txn: Callable[[sqlite3.Connection], T]
    committed: Callable[[], None] | None
    undone: Callable[[], None] | None
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[T]
    value: Any = None
    error: BaseException | None = None


def _settle(future: asyncio.Future[Any], value: Any, error: BaseException | None) -> None:
    if future.done():  # the caller was cancelled: the outcome is the storage's, not theirs
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)


def _settle_all(outcomes: list[tuple[asyncio.Future[Any], Any, BaseException | None]]) -> None:
    for future, value, error in outcomes:
        _settle(future, value, error)


class GroupCommit:
    """The write queue of one SQLite handle (see the module docstring).

    ``executor`` and ``connection`` are read at each use: the handle opens and closes them.
    """

    def __init__(
        self,
        executor: Callable[[], Executor | None],
        connection: Callable[[], sqlite3.Connection | None],
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
    ) -> None:
        if max_batch < 1:
            raise ValueError("max_batch must be at least 1")
        self._executor = executor
        self._connection = connection
        self.max_batch = max_batch
        self._pending: deque[_Write[Any]] = deque()
        self._lock = threading.Lock()
        self._scheduled = False
        self.groups = 0
        """Transactions committed or attempted (for tests and benchmarks: writes / groups)."""
        self.writes = 0

    async def write(
        self,
        what: str,
        txn: Callable[[sqlite3.Connection], T],
        *,
        committed: Callable[[], None] | None = None,
        undone: Callable[[], None] | None = None,
    ) -> T:
        """Run ``txn`` in the next group's transaction; return its value once that committed."""
        executor = self._executor()
        if executor is None:
            raise StorageError("sqlite storage is not open")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._pending.append(_Write(what, txn, committed, undone, loop, future))
            schedule = not self._scheduled
            self._scheduled = True
        if schedule:
            self._schedule(executor)
        return await future

    # -- the worker thread ---------------------------------------------------------------------
    def _schedule(self, executor: Executor | None) -> None:
        try:
            if executor is None:
                raise RuntimeError("closed")
            executor.submit(self._turn)
        except RuntimeError:  # the handle is closing: nothing will run the queue again
            with self._lock:
                stranded = list(self._pending)
                self._pending.clear()
                self._scheduled = False
            for w in stranded:
                self._deliver(w, None, StorageError("sqlite storage is not open"))

    def _turn(self) -> None:
        """One group: take what is queued (up to ``max_batch``), commit it, settle each caller;
        queue the next turn behind whatever else the executor holds."""
        with self._lock:
            n = min(len(self._pending), self.max_batch)
            group = [self._pending.popleft() for _ in range(n)]
        try:
            if group:
                self._commit(group)
        except BaseException as exc:  # noqa: BLE001 - a bug here must not strand the callers
            for w in group:
                self._deliver(w, None, StorageError(f"sqlite: {w.what}: group commit failed: {exc!r}"))
        finally:
            with self._lock:
                again = bool(self._pending)
                self._scheduled = again
            if again:
                self._schedule(self._executor())

    def _commit(self, group: list[_Write[Any]]) -> None:
        conn = self._connection()
        self.groups += 1
        self.writes += len(group)
        if conn is None:
            for w in group:
                w.error = StorageError("sqlite storage is not open")
        else:
            self._run_group(conn, group)
        for w in group:  # callbacks in the group's order, then the callers
            hook = w.committed if w.error is None else w.undone
            if hook is not None:
                try:
                    hook()
                except Exception as exc:  # noqa: BLE001 - a cache hook must not strand callers
                    if w.error is None:
                        w.error = StorageError(f"sqlite: {w.what}: after commit: {exc!r}")
        # one wake-up of each caller's loop for the whole group (each is a write to the loop's
        # self-pipe, which hands the GIL over), not one per write
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any, BaseException | None]]] = {}
        for w in group:
            by_loop.setdefault(w.loop, []).append((w.future, w.value, w.error))
        for loop, outcomes in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle_all, outcomes)
            except RuntimeError:  # that loop is closed: nobody is waiting any more
                pass

    def _run_group(self, conn: sqlite3.Connection, group: list[_Write[Any]]) -> None:
        """Fill each write's ``value`` or ``error``; a write with no error is committed."""
        open_since = 0  # index of the first write in the current transaction
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            for w in group:
                w.error = map_sqlite_error(exc, w.what)
            return
        for i, w in enumerate(group):
            try:
                conn.execute("SAVEPOINT jf_write")
                w.value = w.txn(conn)
                conn.execute("RELEASE jf_write")
            except BaseException as exc:  # noqa: BLE001 - each caller gets its own exception
                w.value = None
                w.error = map_sqlite_error(exc, w.what) if isinstance(exc, sqlite3.Error) else exc
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK TO jf_write")
                        conn.execute("RELEASE jf_write")
                        continue
                    except sqlite3.Error:
                        pass
                # SQLite dropped the whole transaction (I/O, disk full): the writes before this
                # one in it are gone too; fail them with this error, start again for the rest
                kind = type(w.error) if type(w.error) in _PLAIN else StorageError
                for earlier in group[open_since:i]:
                    if earlier.error is None:
                        earlier.value = None
                        earlier.error = kind(f"sqlite: {earlier.what}: rolled back with its group's "
                                             f"transaction by the failure of {w.what}: {w.error}")
                if conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK")
                    except sqlite3.Error:
                        pass  # the connection is past saving; the next BEGIN reports it
                open_since = i + 1
                if open_since < len(group):
                    try:
                        conn.execute("BEGIN IMMEDIATE")
                    except sqlite3.Error as again:
                        for rest in group[open_since:]:
                            rest.error = map_sqlite_error(again, rest.what)
                        return
        try:
            if conn.in_transaction:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                try:
                    conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            for w in group[open_since:]:
                if w.error is None:
                    w.value, w.error = None, map_sqlite_error(exc, w.what)

    @staticmethod
    def _deliver(w: _Write[Any], value: Any, error: BaseException | None) -> None:
        try:
            w.loop.call_soon_threadsafe(_settle, w.future, value, error)
        except RuntimeError:  # the caller's loop is closed: nobody is waiting any more
            pass
