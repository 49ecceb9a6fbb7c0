"""Storage behaviour, run on both backends (SQLite file and a real redis-server)."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import traceback
from pathlib import Path

import pytest
from jf_test_support.storage_support import H0, METHOD, T0, incr, label, make_record

from judgefuse.judges.types import Letter
from judgefuse.service.storage import (
    AccumulatorOverflow,
    ModelRecord,
    ServingVersions,
    SQLiteStorage,
    Storage,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
    ThresholdRecord,
    VerdictExists,
    VerdictNotFound,
    VerdictRecord,
    hour_of,
    open_storage,
)
from judgefuse.service.storage.redis import RedisStorage, redact_url

# -- verdicts ----------------------------------------------------------------------------------


async def test_ping_save_get_roundtrip(storage: Storage) -> None:
    assert await storage.ping() is True
    record = make_record("v1")
    await storage.save_verdict("acme", record)
    assert await storage.get_verdict("acme", "v1") == record
    assert await storage.get_verdict("acme", "nope") is None
    bare = make_record("v2", with_item=False)
    await storage.save_verdict("acme", bare)
    got = await storage.get_verdict("acme", "v2")
    assert got is not None and got.item is None and got.verdict.votes[1].error == "timeout"


async def test_save_is_create_only(storage: Storage) -> None:
    record = make_record("v1")
    await storage.save_verdict("acme", record)
    await storage.save_verdict("acme", record)  # a retried identical save is a no-op
    with pytest.raises(VerdictExists):
        await storage.save_verdict("acme", make_record("v1", confidence=0.5))
    with pytest.raises(ValueError, match="set_label"):
        await storage.save_verdict("acme", make_record("v9").model_copy(update={"label": "A"}))
    with pytest.raises(ValueError, match="tenant"):
        await storage.save_verdict("other", make_record("v9"))
    with pytest.raises(ValueError, match="tenant"):
        await storage.get_verdict("bad{tenant}", "v1")
    assert await storage.get_verdict("acme", "v1") == record


async def test_tenant_isolation(storage: Storage) -> None:
    await storage.save_verdict("acme", make_record("same", tenant="acme", confidence=0.75))
    assert await storage.get_verdict("globex", "same") is None
    await storage.save_verdict("globex", make_record("same", tenant="globex", confidence=0.5))
    got_a = await storage.get_verdict("acme", "same")
    got_g = await storage.get_verdict("globex", "same")
    assert got_a is not None and got_a.verdict.confidence == 0.75
    assert got_g is not None and got_g.verdict.confidence == 0.5
    await label(storage, "same", "A", tenant="acme")
    assert (await storage.get_verdict("globex", "same")).label is None  # type: ignore[union-attr]
    assert await storage.read_accumulator("globex", METHOD) == {}
    assert await storage.list_accumulators("globex") == []
    assert await storage.count_labelled("globex") == 0
    assert await storage.iter_labelled("globex") == []
    assert await storage.count_labelled("acme") == 1
    tau = ThresholdRecord(panel="p1", threshold=0.9, created_at=T0)
    await storage.put_threshold("acme", "p1", tau)
    assert await storage.get_threshold("globex", "p1") is None


# -- labels ------------------------------------------------------------------------------------


async def test_label_relabel_and_idempotence(storage: Storage) -> None:
    await storage.save_verdict("acme", make_record("v1", choice="A", confidence=0.75))

    first = await label(storage, "v1", "A")
    assert first.status == "labelled" and first.previous is None
    assert first.record.label == "A" and first.record.labelled_at == T0 + 100.0
    expected_right = {"n": 1.0, "correct": 1.0, "sum_c": 0.75, "sum_cz": 0.75}
    assert first.applied[METHOD] == expected_right
    assert await storage.read_accumulator("acme", METHOD) == expected_right
    assert await storage.read_accumulator("acme", "p1:judge:j1") == {"n": 1.0, "correct": 1.0}
    stored = await storage.get_verdict("acme", "v1")
    assert stored is not None and stored.label == "A"

    again = await label(storage, "v1", "A")
    assert again.status == "unchanged" and again.applied == {}
    assert await storage.read_accumulator("acme", METHOD) == expected_right

    relabel = await label(storage, "v1", "B")
    assert relabel.status == "relabelled" and relabel.previous == "A"
    assert relabel.applied[METHOD] == {"n": 0.0, "correct": -1.0, "sum_c": 0.0, "sum_cz": -0.75}
    expected_wrong = {"n": 1.0, "correct": 0.0, "sum_c": 0.75, "sum_cz": 0.0}
    assert await storage.read_accumulator("acme", METHOD) == expected_wrong
    assert await storage.read_accumulator("acme", "p1:judge:j1") == {"n": 1.0, "correct": 0.0}
    assert (await storage.get_verdict("acme", "v1")).label == "B"  # type: ignore[union-attr]

    back = await label(storage, "v1", "A")
    assert back.status == "relabelled" and back.previous == "B"
    assert await storage.read_accumulator("acme", METHOD) == expected_right
    assert await storage.count_labelled("acme") == 1


async def test_many_records_sum_exactly(storage: Storage) -> None:
    confidences = [0.5, 0.625, 0.75, 0.875, 1.0, 0.5625]
    for i, c in enumerate(confidences):
        await storage.save_verdict("acme", make_record(f"v{i}", confidence=c))
    letters: list[Letter] = ["A", "B", "A", "A", "B", "A"]
    for i, letter in enumerate(letters):
        await label(storage, f"v{i}", letter)
    right = [c for c, letter in zip(confidences, letters, strict=True) if letter == "A"]
    assert await storage.read_accumulator("acme", METHOD) == {
        "n": 6.0, "correct": float(len(right)), "sum_c": sum(confidences), "sum_cz": sum(right),
    }


async def test_unknown_verdict_raises(storage: Storage) -> None:
    with pytest.raises(VerdictNotFound) as info:
        await label(storage, "ghost", "A")
    assert info.value.verdict_id == "ghost" and info.value.tenant == "acme"
    await storage.save_verdict("acme", make_record("v1"))
    with pytest.raises(VerdictNotFound):
        await label(storage, "v1", "A", tenant="globex")  # another tenant's id is unknown
    with pytest.raises(ValueError):
        await storage.set_label("acme", "v1", "C", incr)  # type: ignore[arg-type]


async def test_failed_increments_write_nothing(storage: Storage) -> None:
    await storage.save_verdict("acme", make_record("v1"))

    def broken(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, float]]:
        raise RuntimeError("accumulator bug")

    def nan(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, float]]:
        return {"k": {"n": 1.0, "x": float("nan")}}

    with pytest.raises(RuntimeError, match="accumulator bug"):
        await storage.set_label("acme", "v1", "A", broken)
    with pytest.raises(ValueError, match="non-finite"):
        await storage.set_label("acme", "v1", "A", nan)
    assert (await storage.get_verdict("acme", "v1")).label is None  # type: ignore[union-attr]
    assert await storage.list_accumulators("acme") == []
    assert await storage.count_labelled("acme") == 0
    # and the storage still works afterwards (no transaction left open)
    assert (await label(storage, "v1", "A")).status == "labelled"


async def test_concurrent_same_label_counts_once(storage: Storage) -> None:
    await storage.save_verdict("acme", make_record("v1", confidence=0.75))
    outcomes = await asyncio.gather(*(label(storage, "v1", "A") for _ in range(20)))
    assert sorted(o.status for o in outcomes) == ["labelled"] + ["unchanged"] * 19
    assert await storage.read_accumulator("acme", METHOD) == {
        "n": 1.0, "correct": 1.0, "sum_c": 0.75, "sum_cz": 0.75,
    }
    assert await storage.count_labelled("acme") == 1


async def test_concurrent_relabels_never_double_count(storage: Storage) -> None:
    await storage.save_verdict("acme", make_record("v1", confidence=0.75))
    letters: list[Letter] = ["A", "B"] * 10
    outcomes = await asyncio.gather(*(label(storage, "v1", x) for x in letters))
    assert sum(o.status == "labelled" for o in outcomes) == 1
    final = await storage.get_verdict("acme", "v1")
    assert final is not None and final.label in ("A", "B")
    want = incr(final, final.label)
    for key, fields in want.items():
        assert await storage.read_accumulator("acme", key) == fields


async def test_concurrent_labels_of_many_records(storage: Storage) -> None:
    for i in range(20):
        await storage.save_verdict("acme", make_record(f"v{i}", confidence=0.5))
    await asyncio.gather(*(label(storage, f"v{i}", "A") for i in range(20)))
    assert await storage.read_accumulator("acme", METHOD) == {
        "n": 20.0, "correct": 20.0, "sum_c": 10.0, "sum_cz": 10.0,
    }


# -- accumulators ------------------------------------------------------------------------------


async def test_hour_windows(storage: Storage) -> None:
    # verdicts made in hours H0, H0+1, H0+2 (two in H0+2); increments go to the verdict's hour
    spec = [("a", 0, 0.5), ("b", 1, 0.625), ("c", 2, 0.75), ("d", 2, 1.0)]
    for vid, offset, c in spec:
        created = T0 + offset * 3600.0 + 59.0
        assert hour_of(created) == H0 + offset
        await storage.save_verdict("acme", make_record(vid, created_at=created, confidence=c))
        await label(storage, vid, "A")
    total = await storage.read_accumulator("acme", METHOD)
    assert total == {"n": 4.0, "correct": 4.0, "sum_c": 2.875, "sum_cz": 2.875}
    assert await storage.read_accumulator("acme", METHOD, since_hour=H0) == total
    assert await storage.read_accumulator("acme", METHOD, since_hour=H0 + 1) == {
        "n": 3.0, "correct": 3.0, "sum_c": 2.375, "sum_cz": 2.375,
    }
    assert await storage.read_accumulator("acme", METHOD, since_hour=H0 + 2) == {
        "n": 2.0, "correct": 2.0, "sum_c": 1.75, "sum_cz": 1.75,
    }
    assert await storage.read_accumulator("acme", METHOD, since_hour=H0 + 3) == {}
    assert await storage.read_accumulator("acme", METHOD, until_hour=H0 + 1) == {
        "n": 1.0, "correct": 1.0, "sum_c": 0.5, "sum_cz": 0.5,
    }
    assert await storage.read_accumulator(
        "acme", METHOD, since_hour=H0 + 1, until_hour=H0 + 2
    ) == {"n": 1.0, "correct": 1.0, "sum_c": 0.625, "sum_cz": 0.625}
    # a relabel of the H0 verdict moves counts inside H0's bucket only
    await label(storage, "a", "B")
    assert await storage.read_accumulator("acme", METHOD, until_hour=H0 + 1) == {
        "n": 1.0, "correct": 0.0, "sum_c": 0.5, "sum_cz": 0.0,
    }
    assert await storage.read_accumulator("acme", METHOD, since_hour=H0 + 1) == {
        "n": 3.0, "correct": 3.0, "sum_c": 2.375, "sum_cz": 2.375,
    }
    assert await storage.read_accumulator("acme", "missing", since_hour=H0) == {}


async def test_list_accumulators(storage: Storage) -> None:
    assert await storage.list_accumulators("acme") == []
    await storage.save_verdict("acme", make_record("v1", panel="p1"))
    await storage.save_verdict("acme", make_record("v2", panel="p2"))
    await label(storage, "v1", "A")
    await label(storage, "v2", "B")
    assert await storage.list_accumulators("acme") == [
        "p1:judge:j1", "p1:method:majority", "p2:judge:j1", "p2:method:majority",
    ]
    assert await storage.list_accumulators("acme", prefix="p2:") == [
        "p2:judge:j1", "p2:method:majority",
    ]
    assert await storage.list_accumulators("acme", prefix="p1:method") == ["p1:method:majority"]
    assert await storage.list_accumulators("acme", prefix="zzz") == []


# -- thresholds and models ---------------------------------------------------------------------


async def test_threshold_versions(storage: Storage) -> None:
    assert await storage.get_threshold("acme", "p1") is None
    assert await storage.threshold_history("acme", "p1") == []
    for i, tau in enumerate([0.9, 0.85, 0.8]):
        record = ThresholdRecord(
            panel="p1", threshold=tau, created_at=T0 + i, method="majority",
            target_precision=0.95, delta=0.05, n_labels=100 * (i + 1), details={"k": [1, 2]},
        )
        assert await storage.put_threshold("acme", "p1", record) == i + 1
    latest = await storage.get_threshold("acme", "p1")
    assert latest is not None and latest.version == 3 and latest.threshold == 0.8
    assert latest.details == {"k": [1, 2]} and latest.n_labels == 300
    first = await storage.get_threshold("acme", "p1", version=1)
    assert first is not None and first.threshold == 0.9
    assert await storage.get_threshold("acme", "p1", version=9) is None
    history = await storage.threshold_history("acme", "p1")
    assert [(r.version, r.threshold) for r in history] == [(1, 0.9), (2, 0.85), (3, 0.8)]
    assert await storage.get_threshold("acme", "p2") is None  # per panel
    with pytest.raises(ValueError, match="panel"):
        await storage.put_threshold("acme", "p2", record)


async def test_concurrent_threshold_puts_get_distinct_versions(storage: Storage) -> None:
    records = [ThresholdRecord(panel="p1", threshold=i / 20, created_at=T0) for i in range(20)]
    versions = await asyncio.gather(*(storage.put_threshold("acme", "p1", r) for r in records))
    assert sorted(versions) == list(range(1, 21))
    history = await storage.threshold_history("acme", "p1")
    assert [r.version for r in history] == list(range(1, 21))
    by_version = {v: r.threshold for v, r in zip(versions, records, strict=True)}
    assert all(by_version[r.version] == r.threshold for r in history if r.version is not None)


async def test_model_versions(storage: Storage) -> None:
    assert await storage.get_model("acme", "p1") is None
    blob = {"coef": [0.5, -1.25], "intercept": 0.125, "features": ["j1"], "nested": {"a": None}}
    v1 = await storage.put_model(
        "acme", "p1", ModelRecord(panel="p1", created_at=T0, method="stacking", params=blob)
    )
    v2 = await storage.put_model(
        "acme", "p1",
        ModelRecord(panel="p1", created_at=T0 + 1, method="stacking", params={"coef": [1.0]},
                    metrics={"ece": 0.03}),
    )
    assert (v1, v2) == (1, 2)
    latest = await storage.get_model("acme", "p1")
    assert latest is not None and latest.version == 2 and latest.metrics == {"ece": 0.03}
    old = await storage.get_model("acme", "p1", version=1)
    assert old is not None and old.params == blob
    assert [m.version for m in await storage.model_history("acme", "p1")] == [1, 2]
    assert await storage.get_model("globex", "p1") is None
    # thresholds and models are numbered independently
    assert await storage.put_threshold(
        "acme", "p1", ThresholdRecord(panel="p1", threshold=0.5, created_at=T0)
    ) == 1



async def test_put_serving_writes_the_pair_only_against_the_versions_it_expects(storage: Storage) -> None:
    """The compare-and-set a promotion, a tune and a rollback write through (issue 45)."""
    def tau(value: float) -> ThresholdRecord:
        return ThresholdRecord(panel="p1", threshold=value, created_at=T0, method="majority",
                               target_precision=0.8, delta=0.1)

    model = ModelRecord(panel="p1", created_at=T0, method="offset_stacked", params={"model_version": "m1"})
    assert await storage.put_serving("acme", "p1", expected=ServingVersions(0, 0), threshold=tau(0.9)) == (1, 0)
    # decided before that threshold: refused, nothing written
    assert await storage.put_serving("acme", "p1", expected=ServingVersions(0, 0), model=model) is None
    assert await storage.get_model("acme", "p1") is None
    assert await storage.put_serving("acme", "p1", expected=ServingVersions(1, 0), threshold=tau(0.7),
                                     model=model) == (2, 1)
    served = await storage.get_model("acme", "p1")
    paired = await storage.get_threshold("acme", "p1")
    assert served is not None and served.version == 1 and served.threshold == paired
    assert paired is not None and paired.version == 2 and paired.threshold == 0.7
    # a plain put of either kind moves the versions a later compare-and-set expects
    assert await storage.put_threshold("acme", "p1", tau(0.6)) == 3
    assert await storage.put_serving("acme", "p1", expected=ServingVersions(2, 1), model=model) is None
    racing = [storage.put_serving("acme", "p1", expected=ServingVersions(3, 1), model=model) for _ in range(8)]
    won = [written for written in await asyncio.gather(*racing) if written is not None]
    assert won == [(3, 2)]
    assert [m.version for m in await storage.model_history("acme", "p1")] == [1, 2]
    assert await storage.put_serving("globex", "p1", expected=ServingVersions(0, 0), model=model) == (0, 1)
    with pytest.raises(ValueError, match="threshold, a model or both"):
        await storage.put_serving("acme", "p1", expected=ServingVersions(3, 2))
    with pytest.raises(ValueError, match="integers >= 0"):
        await storage.put_serving("acme", "p1", expected=ServingVersions(-1, 2), model=model)
    with pytest.raises(ValueError, match="does not match panel"):
        await storage.put_serving("acme", "p2", expected=ServingVersions(0, 0), model=model)


# -- labelled records --------------------------------------------------------------------------


async def test_iter_labelled_order_filter_limit(storage: Storage) -> None:
    spec = [("v1", "p1", 5.0), ("v2", "p2", 3.0), ("v3", "p1", 9.0), ("v4", "p1", 1.0),
            ("v5", "p2", 7.0), ("v6", "p1", 9.0)]
    for vid, panel, dt in spec:
        await storage.save_verdict("acme", make_record(vid, panel=panel, created_at=T0 + dt))
    await storage.save_verdict("acme", make_record("unlabelled", created_at=T0 + 99.0))
    for vid, _, _ in spec:
        await label(storage, vid, "A")
    await label(storage, "v4", "B")  # a relabel neither duplicates nor moves it

    everything = await storage.iter_labelled("acme")
    assert [r.id for r in everything] == ["v6", "v3", "v5", "v1", "v2", "v4"]  # ties: id desc
    assert everything[-1].label == "B"
    assert [r.id for r in await storage.iter_labelled("acme", "p1")] == ["v6", "v3", "v1", "v4"]
    assert [r.id for r in await storage.iter_labelled("acme", "p2")] == ["v5", "v2"]
    assert [r.id for r in await storage.iter_labelled("acme", limit=2)] == ["v6", "v3"]
    assert [r.id for r in await storage.iter_labelled("acme", "p2", limit=1)] == ["v5"]
    assert await storage.iter_labelled("acme", limit=0) == []
    assert await storage.iter_labelled("acme", "p9") == []
    assert await storage.count_labelled("acme") == 6
    assert await storage.count_labelled("acme", "p1") == 4
    assert await storage.count_labelled("acme", "p2") == 2
    assert await storage.count_labelled("acme", "p9") == 0


async def test_context_manager_and_open_storage(sqlite_path: Path, redis_url: str) -> None:
    async with open_storage(str(sqlite_path)) as s:
        assert isinstance(s, SQLiteStorage) and await s.ping()
    assert await s.ping() is False  # closed
    async with open_storage(redis_url) as r:
        assert isinstance(r, RedisStorage) and await r.ping()
    with pytest.raises(ValueError):
        open_storage("mysql://x")


# -- SQLite specifics --------------------------------------------------------------------------


async def test_sqlite_reopen_keeps_everything(sqlite_path: Path) -> None:
    store = SQLiteStorage(sqlite_path)
    await store.open()
    await store.save_verdict("acme", make_record("v1"))
    await label(store, "v1", "A")
    tau = ThresholdRecord(panel="p1", threshold=0.9, created_at=T0)
    await store.put_threshold("acme", "p1", tau)
    await store.put_model("acme", "p1", ModelRecord(panel="p1", created_at=T0, params={"w": 1}))
    await store.close()
    await store.close()  # twice is fine

    again = SQLiteStorage(sqlite_path)
    await again.open()
    try:
        record = await again.get_verdict("acme", "v1")
        assert record is not None and record.label == "A"
        assert await again.read_accumulator("acme", METHOD) == {
            "n": 1.0, "correct": 1.0, "sum_c": 0.75, "sum_cz": 0.75,
        }
        assert await again.read_accumulator("acme", METHOD, since_hour=H0) == {
            "n": 1.0, "correct": 1.0, "sum_c": 0.75, "sum_cz": 0.75,
        }
        assert (await again.get_threshold("acme", "p1")).version == 1  # type: ignore[union-attr]
        assert await again.put_threshold(
            "acme", "p1", ThresholdRecord(panel="p1", threshold=0.8, created_at=T0)
        ) == 2
        assert (await again.get_model("acme", "p1")).params == {"w": 1}  # type: ignore[union-attr]
        assert [r.id for r in await again.iter_labelled("acme")] == ["v1"]
        assert (await label(again, "v1", "A")).status == "unchanged"
    finally:
        await again.close()
    # the file is WAL with synchronous=FULL as documented (checked through a plain connection)
    conn = sqlite3.connect(sqlite_path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
        names = {row[0] for row in rows}
        assert {"verdicts_panel_labelled", "verdicts_labelled"} <= names
    finally:
        conn.close()


async def test_sqlite_pragmas(sqlite_path: Path) -> None:
    store = SQLiteStorage(sqlite_path)
    await store.open()
    try:
        sync = await store._run("pragma", lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
        assert sync == 2  # FULL
    finally:
        await store.close()


async def test_sqlite_two_handles_on_one_file_do_not_double_count(sqlite_path: Path) -> None:
    """Two storages on one file stand for two processes: BEGIN IMMEDIATE serialises them."""
    one, two = SQLiteStorage(sqlite_path), SQLiteStorage(sqlite_path)
    await one.open()
    await two.open()
    try:
        await one.save_verdict("acme", make_record("v1"))
        outcomes = await asyncio.gather(
            *(label(one if i % 2 else two, "v1", "A") for i in range(20))
        )
        assert sorted(o.status for o in outcomes) == ["labelled"] + ["unchanged"] * 19
        assert (await two.read_accumulator("acme", METHOD))["n"] == 1.0
    finally:
        await one.close()
        await two.close()


async def test_sqlite_garbage_file_is_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "garbage.db"
    path.write_bytes(b"this is not a database at all" * 200)
    store = SQLiteStorage(path)
    with pytest.raises(StorageCorrupt):
        await store.open()
    assert await store.ping() is False


async def test_sqlite_unopenable_path_is_unavailable(tmp_path: Path) -> None:
    store = SQLiteStorage(tmp_path / "missing-dir" / "x.db")
    with pytest.raises(StorageUnavailable):
        await store.open()


# -- Redis specifics ---------------------------------------------------------------------------


async def test_redis_unavailable_never_leaks_password() -> None:
    password = "s3cr3t-Pa55word"
    port = _closed_port()
    store = RedisStorage(
        f"redis://admin:{password}@127.0.0.1:{port}/0", retries=0, connect_timeout_s=0.5
    )
    assert password not in repr(store) and password not in store.safe_url
    await store.open()
    try:
        assert await store.ping() is False
        with pytest.raises(StorageUnavailable) as info:
            await store.get_verdict("acme", "v1")
        rendered = "".join(traceback.format_exception(info.value))
        assert password not in rendered and password not in repr(info.value)
        assert "***" in str(info.value) and str(port) in str(info.value)
        assert info.value.__cause__ is not None  # raised from the redis error
        with pytest.raises(StorageUnavailable) as info2:
            await store.set_label("acme", "v1", "A", incr)
        assert password not in "".join(traceback.format_exception(info2.value))
    finally:
        await store.close()


async def test_redis_wrong_password_is_not_retryable_and_redacted(
    redis_with_password: tuple[int, str],
) -> None:
    port, password = redis_with_password
    wrong = RedisStorage(f"redis://:wrong-pw-123@127.0.0.1:{port}/0", retries=0)
    await wrong.open()
    try:
        assert await wrong.ping() is False
        with pytest.raises(StorageError) as info:
            await wrong.get_verdict("acme", "v1")
        assert not isinstance(info.value, StorageUnavailable)  # retrying will not help
        assert "wrong-pw-123" not in "".join(traceback.format_exception(info.value))
    finally:
        await wrong.close()
    async with RedisStorage(f"redis://:{password}@127.0.0.1:{port}/0") as right:
        await right.save_verdict("acme", make_record("v1"))
        assert (await label(right, "v1", "B")).status == "labelled"


async def test_redis_key_naming(redis_url: str) -> None:
    async with RedisStorage(redis_url) as store:
        await store.client.flushdb()
        await store.save_verdict("acme", make_record("v1"))
        await label(store, "v1", "A")
        await store.put_threshold(
            "acme", "p1", ThresholdRecord(panel="p1", threshold=0.9, created_at=T0)
        )
        keys = sorted(await store.client.keys("*"))
        await store.client.flushdb()
    # the tenant set (scans over every tenant) is the one key outside a tenant's slot
    assert all(k.startswith("jf:{acme}:") for k in keys if k != "jf:tenants")
    assert "jf:{acme}:v:v1" in keys and "jf:{acme}:labelled" in keys
    assert f"jf:{{acme}}:acc:hour:{H0}:{METHOD}" in keys
    assert "jf:{acme}:thrseq:p1" in keys and "jf:{acme}:thr:p1" in keys


_WRITER = """
import asyncio, sys, time
sys.path.insert(0, {tests!r})
from jf_test_support.storage_support import make_record, incr, T0
from judgefuse.service.storage import SQLiteStorage

async def main():
    store = SQLiteStorage({path!r})
    await store.open()
    await store.save_verdict("acme", make_record("v1"))
    await store.set_label("acme", "v1", "A", incr, labelled_at=T0)
    print("acked", flush=True)
    time.sleep(60)  # killed here, without close()

asyncio.run(main())
"""


def _run_writer_until_ack_then_kill(code: str) -> bytes:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        return proc.stdout.readline()
    finally:
        proc.kill()  # SIGKILL: no close(), no atexit
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


async def test_sqlite_acknowledged_write_survives_kill(sqlite_path: Path) -> None:
    code = _WRITER.format(tests=str(Path(__file__).resolve().parents[2]), path=str(sqlite_path))
    line = await asyncio.to_thread(_run_writer_until_ack_then_kill, code)
    assert line.strip() == b"acked"
    async with SQLiteStorage(sqlite_path) as store:
        record = await store.get_verdict("acme", "v1")
        assert record is not None and record.label == "A"
        assert (await store.read_accumulator("acme", METHOD))["n"] == 1.0


def test_redact_url() -> None:
    assert redact_url("redis://u:p%40ss@host:6380/2") == "redis://u:***@host:6380/2"
    assert redact_url("redis://host:6379/0") == "redis://host:6379/0"
    assert redact_url("rediss://:pw@[::1]:7000") == "rediss://:***@[::1]:7000"


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- integer fields (the calibration accumulator's fixed-point counters) ------------------------

BIG = 2**53 + 1  # not representable as a float: a float sum would lose the +1s


def incr_int(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, int]]:
    right = record.verdict.choice == letter
    qc = round(record.verdict.confidence * 2**32)  # fixed point, as the accumulator does
    return {"fx": {"n": 1, "k": int(right), "c": qc, "big": BIG if right else 3}}


async def test_integer_fields_sum_exactly(storage: Storage) -> None:
    confidences = [0.1, 0.7, 0.3333]
    for i, c in enumerate(confidences):
        await storage.save_verdict(
            "acme", make_record(f"v{i}", confidence=c, created_at=T0 + i * 3600.0)
        )
        await storage.set_label("acme", f"v{i}", "A", incr_int)
    qcs = [round(c * 2**32) for c in confidences]
    want = {"n": 3, "k": 3, "c": sum(qcs), "big": 3 * BIG}
    total = await storage.read_accumulator("acme", "fx")
    assert total == want and all(type(v) is int for v in total.values())
    window = await storage.read_accumulator("acme", "fx", since_hour=H0 + 1)
    assert window == {"n": 2, "k": 2, "c": qcs[1] + qcs[2], "big": 2 * BIG}
    assert all(type(v) is int for v in window.values())
    out = await storage.set_label("acme", "v0", "B", incr_int)  # relabel: exact undo
    assert out.applied == {"fx": {"n": 0, "k": -1, "c": 0, "big": 3 - BIG}}
    assert await storage.read_accumulator("acme", "fx") == {
        "n": 3, "k": 2, "c": sum(qcs), "big": 2 * BIG + 3,
    }
    assert await storage.read_accumulator("acme", "fx", until_hour=H0 + 1) == {
        "n": 1, "k": 0, "c": qcs[0], "big": 3,
    }


async def test_overflow_refuses_the_whole_label(storage: Storage) -> None:
    def huge(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, int]]:
        return {"a": {"n": 1}, "z": {"n": 1, "x": 2**62}}

    await storage.save_verdict("acme", make_record("v1"))
    await storage.save_verdict("acme", make_record("v2"))
    await storage.set_label("acme", "v1", "A", huge)
    with pytest.raises(AccumulatorOverflow):
        await storage.set_label("acme", "v2", "A", huge)  # 2**63 does not fit in int64
    assert await storage.read_accumulator("acme", "a") == {"n": 1}  # nothing half-applied
    assert await storage.read_accumulator("acme", "z") == {"n": 1, "x": 2**62}
    assert (await storage.get_verdict("acme", "v2")).label is None  # type: ignore[union-attr]
    assert await storage.count_labelled("acme") == 1


async def test_mixed_int_and_float_deltas(storage: Storage) -> None:
    def as_float(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, float]]:
        return {"m": {"x": 0.5}}

    def as_int(record: VerdictRecord, letter: Letter) -> dict[str, dict[str, int]]:
        return {"m": {"x": 2}}

    await storage.save_verdict("acme", make_record("v1"))
    await storage.save_verdict("acme", make_record("v2"))
    await storage.set_label("acme", "v1", "A", as_float)
    await storage.set_label("acme", "v2", "A", as_int)
    assert await storage.read_accumulator("acme", "m") == {"x": 2.5}
    assert await storage.read_accumulator("acme", "m", since_hour=H0) == {"x": 2.5}
