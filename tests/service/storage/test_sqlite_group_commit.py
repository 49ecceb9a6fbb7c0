"""Group commit of SQLite verdict saves and labels (:mod:`judgefuse.service.storage.sqlite.group_commit`).

The writes of one group share a transaction; each still gets its own outcome: a failing write
(a duplicate verdict id, a label for an unknown verdict, a constraint) is its caller's error
alone, and the others commit. Groups are forced by holding the database's write lock from a
second connection (as another process would): the first write waits in ``BEGIN IMMEDIATE``,
the rest queue behind it and go in the next group.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from jf_test_support.storage_support import METHOD, incr, make_record

from judgefuse.service.storage import (
    SQLiteStorage,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictNotFound,
)
from judgefuse.service.storage.sqlite.group_commit import GroupCommit


async def _until(condition: Any, seconds: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not reached: {condition.__doc__ or condition}")
        await asyncio.sleep(0.01)


async def _queued_behind_lock(path: Path, storage: SQLiteStorage, calls: list[Any]) -> list[Any]:
    """Run ``calls`` concurrently while another connection holds the write lock, so the first
    waits in BEGIN IMMEDIATE and the others form the next group; their outcomes, in order."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        before = storage.group_commit.groups
        tasks = [asyncio.create_task(calls[0])]
        await _until(lambda: storage.group_commit.groups == before + 1)  # the first is waiting
        tasks += [asyncio.create_task(call) for call in calls[1:]]
        await _until(lambda: len(storage.group_commit._pending) == len(calls) - 1)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    return await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_failing_write_fails_alone_and_the_rest_of_its_group_commits(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite3"
    storage = SQLiteStorage(path, busy_timeout_s=20)
    await storage.open()
    await storage.save_verdict("acme", make_record("v0"))
    groups, writes = storage.group_commit.groups, storage.group_commit.writes
    outcomes = await _queued_behind_lock(path, storage, [
        storage.save_verdict("acme", make_record("first")),
        storage.save_verdict("acme", make_record("a")),
        storage.save_verdict("acme", make_record("v0", choice="B")),  # same id, other body
        storage.set_label("acme", "a", "A", incr),  # labels "a", saved earlier in the group
        storage.set_label("acme", "nope", "B", incr),  # no such verdict
        storage.save_verdict("acme", make_record("b", confidence=0.6)),
        storage.set_label("acme", "v0", "B", incr),
    ])
    first, a, dup, label_a, missing, b, label_v0 = outcomes
    assert first is None and a is None and b is None
    assert isinstance(dup, VerdictExists)
    assert isinstance(missing, VerdictNotFound)
    assert label_a.status == "labelled" and label_a.label == "A"
    assert label_v0.status == "labelled" and label_v0.label == "B"
    # one group for the first write, one for the six queued behind it
    assert storage.group_commit.groups - groups == 2
    assert storage.group_commit.writes - writes == 7
    # the accumulator read cache agrees with the file
    cached = await storage.read_accumulator("acme", METHOD)
    await storage.close()

    again = SQLiteStorage(path)
    await again.open()
    try:
        for vid in ("first", "a", "b", "v0"):
            assert await again.get_verdict("acme", vid) is not None
        assert await again.get_verdict("acme", "nope") is None
        v0 = await again.get_verdict("acme", "v0")
        assert v0 is not None and v0.verdict.choice == "A" and v0.label == "B"  # not overwritten
        stored_a = await again.get_verdict("acme", "a")
        assert stored_a is not None and stored_a.label == "A"
        stored = await again.read_accumulator("acme", METHOD)
        # two labels: "a" (A, correct, c 0.75) and "v0" (B, wrong, c 0.75)
        assert stored == pytest.approx({"n": 2.0, "correct": 1.0, "sum_c": 1.5, "sum_cz": 0.75})
        assert cached == stored
    finally:
        await again.close()


async def test_a_cancelled_caller_does_not_take_its_write_out_of_the_group(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite3"
    storage = SQLiteStorage(path, busy_timeout_s=20)
    await storage.open()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    task = asyncio.create_task(storage.save_verdict("acme", make_record("kept")))
    await _until(lambda: storage.group_commit.groups == 1)
    task.cancel()
    blocker.execute("ROLLBACK")
    blocker.close()
    with pytest.raises(asyncio.CancelledError):
        await task
    # the next write queues behind the cancelled one's group: once it returns, that committed
    await storage.save_verdict("acme", make_record("after"))
    assert await storage.get_verdict("acme", "kept") is not None
    await storage.close()


def _table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY, v INTEGER)")


async def test_constraint_error_is_mapped_for_its_caller_only(tmp_path: Path) -> None:
    """A raw ``sqlite3.Error`` inside one write becomes that caller's StorageError."""
    conn = sqlite3.connect(tmp_path / "raw.sqlite3", isolation_level=None, check_same_thread=False)
    _table(conn)
    conn.execute("INSERT INTO t VALUES ('x', 0)")
    executor = ThreadPoolExecutor(max_workers=1)
    gate = threading.Event()
    executor.submit(gate.wait)  # the worker is busy: every write below queues into one group
    group = GroupCommit(lambda: executor, lambda: conn)

    def insert(k: str) -> Any:
        return lambda c: c.execute("INSERT INTO t VALUES (?, 1)", (k,)).rowcount

    tasks = [asyncio.create_task(group.write(f"insert {k}", insert(k))) for k in ("y", "x", "z")]
    await _until(lambda: len(group._pending) == 3)
    gate.set()
    y, x, z = await asyncio.gather(*tasks, return_exceptions=True)
    assert (y, z) == (1, 1)
    assert isinstance(x, StorageError) and "insert x" in str(x) and "CONSTRAINT" in str(x)
    assert group.groups == 1 and group.writes == 3
    rows = dict(conn.execute("SELECT k, v FROM t").fetchall())
    assert rows == {"x": 0, "y": 1, "z": 1}
    executor.shutdown()
    conn.close()


async def test_busy_past_the_timeout_fails_every_write_of_the_group_uncommitted(tmp_path: Path) -> None:
    path = tmp_path / "busy.sqlite3"
    storage = SQLiteStorage(path, busy_timeout_s=0.3)
    await storage.open()
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        outcomes = await asyncio.gather(
            storage.save_verdict("acme", make_record("p")),
            storage.save_verdict("acme", make_record("q")),
            return_exceptions=True,
        )
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert all(isinstance(o, StorageUnavailable) for o in outcomes), outcomes
    assert await storage.get_verdict("acme", "p") is None
    assert await storage.get_verdict("acme", "q") is None
    await storage.close()


async def test_disk_full_in_one_write_reports_every_outcome_as_stored(tmp_path: Path) -> None:
    """SQLITE_FULL (a page limit standing in for a full disk) may roll back more than its own
    statement; whatever SQLite did, a write reported as done is in the file and a write
    reported as failed is not."""
    conn = sqlite3.connect(tmp_path / "full.sqlite3", isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    _table(conn)
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 3}")
    executor = ThreadPoolExecutor(max_workers=1)
    gate = threading.Event()
    executor.submit(gate.wait)
    group = GroupCommit(lambda: executor, lambda: conn)

    def insert(k: str, size: int) -> Any:
        return lambda c: c.execute("INSERT INTO t VALUES (?, ?)", (k, "x" * size)).rowcount

    sizes = {"a": 10, "big": 200_000, "b": 10, "huge": 400_000, "c": 10}
    tasks = {k: asyncio.create_task(group.write(f"insert {k}", insert(k, n))) for k, n in sizes.items()}
    await _until(lambda: len(group._pending) == len(sizes))
    gate.set()
    outcomes = dict(zip(tasks, await asyncio.gather(*tasks.values(), return_exceptions=True), strict=True))
    assert isinstance(outcomes["big"], StorageUnavailable) and "FULL" in str(outcomes["big"])
    stored = {k for (k,) in conn.execute("SELECT k FROM t").fetchall()}
    reported = {k for k, o in outcomes.items() if not isinstance(o, BaseException)}
    assert reported == stored, (outcomes, stored)
    for k in sizes.keys() - stored:  # each failure says which write it is and why
        assert isinstance(outcomes[k], StorageUnavailable) and f"insert {k}" in str(outcomes[k])
    executor.shutdown()
    conn.close()
