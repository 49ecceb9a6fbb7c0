"""PostgreSQL specifics, on a real server started by the tests (the contract itself runs on it
through the ``storage`` fixture): day partitions, the schema version, errors that never carry
the password, two handles (two pools, as two replicas) racing on one database, retention by
partition drop, and the export scan."""

from __future__ import annotations

import asyncio
import socket
import traceback

import psycopg
import pytest
from jf_test_support.pg_server import reset_postgres
from jf_test_support.storage_support import T0, incr, make_record, stamped

from judgefuse.service.storage import StorageError, StorageUnavailable, VerdictRecord
from judgefuse.service.storage.postgres import PostgresStorage
from judgefuse.service.storage.postgres.errors import error_class, redact_url
from judgefuse.service.storage.postgres.partitions import DAY_S, day_of, partition_name
from judgefuse.service.storage.postgres.schema import SCHEMA_VERSION
from judgefuse.service.storage.retention import RetentionReport

DAY0 = day_of(T0)


@pytest.fixture
async def pg(postgres_url: str) -> PostgresStorage:
    await reset_postgres(postgres_url)
    store = PostgresStorage(postgres_url)
    await store.open()
    try:
        yield store  # type: ignore[misc]
    finally:
        await store.close()


async def _partitions(url: str) -> list[str]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'verdicts'::regclass ORDER BY 1"
        )
        return [row[0] for row in await cur.fetchall()]


async def _rows_in(url: str, table: str) -> int:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(f"SELECT count(*) FROM {table}")
        row = await cur.fetchone()
        return int(row[0]) if row else 0


def at_day(vid: str, day: int, second: float = 100.0, **kw: object) -> VerdictRecord:
    return make_record(vid, created_at=day * DAY_S + second, **kw)  # type: ignore[arg-type]


# -- partitions and schema ---------------------------------------------------------------------


async def test_each_day_gets_its_partition(pg: PostgresStorage, postgres_url: str) -> None:
    for offset in (0, 1, 3):
        await pg.save_verdict("acme", at_day(f"v{offset}", DAY0 + offset))
    names = await _partitions(postgres_url)
    for offset in (0, 1, 3):
        assert partition_name(DAY0 + offset) in names
        assert await _rows_in(postgres_url, partition_name(DAY0 + offset)) == 1
    assert partition_name(DAY0 + 2) not in names  # only days that have records
    assert await _rows_in(postgres_url, "verdicts_default") == 0
    assert (await pg.get_verdict("acme", "v3")) == at_day("v3", DAY0 + 3)


async def test_two_replicas_create_one_new_day_concurrently(postgres_url: str) -> None:
    """Many writers from two pools hit a day with no partition at once: one creates it, none
    fails, every record lands in it."""
    await reset_postgres(postgres_url)
    a, b = PostgresStorage(postgres_url), PostgresStorage(postgres_url)
    await a.open()
    await b.open()
    try:
        day = DAY0 + 40
        await asyncio.gather(*(
            (a if i % 2 else b).save_verdict("acme", at_day(f"r{i}", day, 10.0 + i))
            for i in range(16)
        ))
        assert await _rows_in(postgres_url, partition_name(day)) == 16
        assert await _rows_in(postgres_url, "verdicts_default") == 0
    finally:
        await a.close()
        await b.close()


async def test_schema_is_stamped_and_a_newer_one_is_refused(
    pg: PostgresStorage, postgres_url: str
) -> None:
    assert await pg.schema_version() == SCHEMA_VERSION
    await pg.save_verdict("acme", make_record("kept"))
    await pg.close()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION + 1,))
    newer = PostgresStorage(postgres_url)
    with pytest.raises(StorageError, match=rf"has schema {SCHEMA_VERSION + 1}, newer than this code"):
        await newer.open()
    assert "pg-Secr3t" not in repr(newer)
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT version FROM schema_version")
        assert await cur.fetchall() == [(SCHEMA_VERSION + 1,)]  # left as it was
        await conn.execute("UPDATE schema_version SET version = %s", (SCHEMA_VERSION,))
    async with PostgresStorage(postgres_url) as again:  # reopening keeps the data
        assert (await again.get_verdict("acme", "kept")) == make_record("kept")


async def test_a_version_1_database_is_migrated_on_open(pg: PostgresStorage, postgres_url: str) -> None:
    """Version 2 added the index ``iter_recent`` reads, version 3 the label history: a
    database stamped 1 (without either) gains both on open, keeps its records, and is stamped
    3; a second open changes nothing."""
    assert SCHEMA_VERSION == 3
    await pg.save_verdict("acme", make_record("v1"))
    await pg.close()
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        await conn.execute("DROP INDEX verdicts_panel_recent")
        await conn.execute("DROP TABLE label_history")
        await conn.execute("UPDATE schema_version SET version = 1")
    async with PostgresStorage(postgres_url) as migrated:
        assert await migrated.schema_version() == 3
        assert [r.id for r in await migrated.iter_recent("acme", "p1", limit=5)] == ["v1"]
        assert await migrated.label_history("acme", "v1") == []
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        cur = await conn.execute("SELECT to_regclass('verdicts_panel_recent') IS NOT NULL "
                                 "AND to_regclass('label_history') IS NOT NULL")
        assert await cur.fetchone() == (True,)
        cur = await conn.execute("SELECT count(*) FROM schema_version")
        assert await cur.fetchone() == (1,)


# -- errors and the password -------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_unreachable_server_is_unavailable_and_never_shows_the_password() -> None:
    password = "s3cr3t-Pa55word"
    port = _closed_port()
    store = PostgresStorage(
        f"postgresql://admin:{password}@127.0.0.1:{port}/jf", connect_timeout_s=1,
        pool_timeout_s=1,
    )
    assert password not in repr(store) and "***" in store.safe_url
    with pytest.raises(StorageUnavailable) as info:
        await store.open()
    rendered = "".join(traceback.format_exception(info.value))
    assert password not in rendered and password not in repr(info.value)
    assert "***" in str(info.value) and str(port) in str(info.value)
    assert info.value.__cause__ is not None
    assert await store.ping() is False


async def test_wrong_password_is_not_retryable_and_redacted(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    wrong_url = postgres_url.replace(":pg-Secr3t-xyz@", ":wrong-pw-123@")
    assert wrong_url != postgres_url
    wrong = PostgresStorage(wrong_url, pool_timeout_s=2)
    with caplog.at_level("DEBUG"):
        with pytest.raises(StorageError) as info:
            await wrong.open()
        await asyncio.sleep(0.2)  # let the pool's background connect fail and log too
    assert not isinstance(info.value, StorageUnavailable)  # retrying will not help
    assert "password authentication failed" in str(info.value) and "***" in str(info.value)
    rendered = "".join(traceback.format_exception(info.value))
    assert "wrong-pw-123" not in rendered and "wrong-pw-123" not in caplog.text
    assert await wrong.ping() is False
    async with PostgresStorage(postgres_url) as right:  # the right password works
        assert await right.ping()
    assert "pg-Secr3t-xyz" not in caplog.text


def test_error_classes_by_sqlstate() -> None:
    from judgefuse.service.storage import AccumulatorOverflow, StorageCorrupt

    class Fake(Exception):
        def __init__(self, sqlstate: str) -> None:
            self.sqlstate = sqlstate

    assert error_class(Fake("08006")) is StorageUnavailable  # connection failure
    assert error_class(Fake("57P01")) is StorageUnavailable  # admin shutdown
    assert error_class(Fake("53100")) is StorageUnavailable  # disk full
    assert error_class(Fake("40001")) is StorageUnavailable  # serialization, retries exhausted
    assert error_class(Fake("XX001")) is StorageCorrupt
    assert error_class(Fake("22003")) is AccumulatorOverflow
    assert error_class(Fake("28P01")) is StorageError  # wrong password: retrying will not help
    assert error_class(Fake("23505")) is StorageError
    assert redact_url("postgresql://u:p%40ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert redact_url("postgres://h/db") == "postgres://h/db"


def test_pool_size_comes_from_the_url_and_never_reaches_libpq() -> None:
    store = PostgresStorage(
        "postgresql://u:pw@db/jf?sslmode=require&pool_max_size=40&pool_min_size=4&pool_timeout_s=2.5"
    )
    assert (store.min_size, store.max_size, store.pool_timeout_s) == (4, 40, 2.5)
    assert "pool_" not in store._url and "sslmode=require" in store._url
    assert PostgresStorage("postgresql://db/jf").max_size == 10
    spaced = PostgresStorage("postgresql://db/jf?options=-c%20statement_timeout%3D5000&pool_max_size=3")
    assert spaced._url == "postgresql://db/jf?options=-c%20statement_timeout%3D5000"
    with pytest.raises(ValueError, match="storage_url: pool_max_size must be a positive number"):
        PostgresStorage("postgresql://db/jf?pool_max_size=0")
    with pytest.raises(ValueError, match="pool_min_size must not exceed pool_max_size"):
        PostgresStorage("postgresql://db/jf?pool_max_size=2&pool_min_size=3")


# -- two replicas on one database --------------------------------------------------------------


async def test_two_replicas_labelling_one_record_count_it_once(postgres_url: str) -> None:
    await reset_postgres(postgres_url)
    a, b = PostgresStorage(postgres_url), PostgresStorage(postgres_url)
    await a.open()
    await b.open()
    try:
        await a.save_verdict("acme", make_record("v1"))
        for round_no in range(5):
            label = "A" if round_no % 2 else "B"
            outcomes = await asyncio.gather(
                *((a if i % 2 else b).set_label("acme", "v1", label, incr) for i in range(8))
            )
            changed = [o for o in outcomes if o.status != "unchanged"]
            assert len(changed) == 1  # one writer relabels, the rest see the label already there
        totals = await a.read_accumulator("acme", "p1:method:majority")
        assert totals["n"] == 1.0 and totals["correct"] == 0.0  # last label B, verdict chose A
    finally:
        await a.close()
        await b.close()


async def test_two_replicas_lease_disjoint_items(postgres_url: str) -> None:
    await reset_postgres(postgres_url)
    a, b = PostgresStorage(postgres_url), PostgresStorage(postgres_url)
    await a.open()
    await b.open()
    try:
        for i in range(30):
            await a.save_verdict("acme", stamped(f"q{i}", rank=i / 30))
        leases = await asyncio.gather(*(
            (a if i % 2 else b).lease_review(
                "acme", "p1", n=4, annotator=f"ann{i}", lease_s=60, now=T0 + 100
            )
            for i in range(10)
        ))
        ids = [lease.record.id for batch in leases for lease in batch]
        assert len(ids) == len(set(ids)) == 30  # every item once, none twice
    finally:
        await a.close()
        await b.close()


# -- retention ---------------------------------------------------------------------------------


async def test_retention_drops_old_days_keeps_pending_and_the_refit_window(
    pg: PostgresStorage, postgres_url: str
) -> None:
    # day 0 and day 1 are old; day 2 holds the cut (its first half is old too); day 3 is new
    for day in range(4):
        for i in range(5):
            await pg.save_verdict("acme", at_day(f"d{day}-{i}", DAY0 + day, 100.0 + i))
    await pg.save_verdict("acme", stamped("pending", created_at=DAY0 * DAY_S + 500))
    await pg.save_verdict("acme", stamped("pending-new", created_at=(DAY0 + 3) * DAY_S + 500))
    for vid in ("d0-0", "d0-1", "d1-0", "d2-0", "d3-0", "d3-1"):
        await pg.set_label("acme", vid, "A", incr)
    before = await pg.read_accumulator("acme", "p1:method:majority")
    cut = (DAY0 + 2) * DAY_S + 102.5  # d2-0..d2-2 are older than the cut, d2-3, d2-4 not

    # keep the newest 4 labelled of p1: d3-1, d3-0, d2-0, d1-0; d0-0 and d0-1 go
    report = await pg.apply_retention(older_than=cut, keep_labelled=4)
    assert report == RetentionReport(dropped=(6 + 5 + 3) - 3, kept_pending=1, kept_labelled=2)
    # idempotent: the same pass again drops nothing and keeps the same
    again = await pg.apply_retention(older_than=cut, keep_labelled=4)
    assert again == RetentionReport(dropped=0, kept_pending=1, kept_labelled=2)
    remaining = {r.id async for r in pg.iter_records("acme")}
    assert remaining == {
        "pending", "d1-0", "d2-0", "d2-3", "d2-4", "pending-new",
        *(f"d3-{i}" for i in range(5)),
    }
    names = await _partitions(postgres_url)
    assert partition_name(DAY0) not in names and partition_name(DAY0 + 1) not in names
    assert partition_name(DAY0 + 2) in names  # holds the cut: emptied row by row
    assert await _rows_in(postgres_url, "verdicts_default") == 2  # pending, d1-0 moved there
    # accumulators are never touched; kept records stay usable
    assert await pg.read_accumulator("acme", "p1:method:majority") == before
    assert (await pg.set_label("acme", "pending", "B", incr)).status == "labelled"
    assert (await pg.set_label("acme", "d1-0", "B", incr)).status == "relabelled"
    assert await pg.get_verdict("acme", "d0-3") is None

    # the label moved "pending" out of the queue and below the newest 4: the next pass drops it
    after = await pg.apply_retention(older_than=cut, keep_labelled=4)
    assert after == RetentionReport(dropped=1, kept_pending=0, kept_labelled=2)


async def test_retention_frees_ids_and_late_records_of_dropped_days_land_in_default(
    pg: PostgresStorage, postgres_url: str
) -> None:
    await pg.save_verdict("acme", at_day("old", DAY0))
    report = await pg.apply_retention(older_than=(DAY0 + 1) * DAY_S, keep_labelled=10)
    assert report == RetentionReport(dropped=1, kept_pending=0, kept_labelled=0)
    assert await pg.get_verdict("acme", "old") is None
    # a late record of the dropped day: no partition is recreated below the watermark
    fresh = PostgresStorage(postgres_url)  # a replica with no cached days
    async with fresh:
        await fresh.save_verdict("acme", at_day("old", DAY0, 200.0))  # the id is free again
        assert (await fresh.get_verdict("acme", "old")) == at_day("old", DAY0, 200.0)
    assert partition_name(DAY0) not in await _partitions(postgres_url)
    assert await _rows_in(postgres_url, "verdicts_default") == 1


async def test_retention_with_keep_zero_and_no_old_days(pg: PostgresStorage) -> None:
    await pg.save_verdict("acme", at_day("a", DAY0, 10.0))
    await pg.set_label("acme", "a", "A", incr)
    assert await pg.apply_retention(older_than=DAY0 * DAY_S, keep_labelled=0) == RetentionReport(0, 0, 0)
    assert await pg.apply_retention(older_than=DAY0 * DAY_S + 11, keep_labelled=0) == RetentionReport(1, 0, 0)
    assert await pg.count_labelled("acme") == 0
    with pytest.raises(ValueError, match="keep_labelled"):
        await pg.apply_retention(older_than=1.0, keep_labelled=-1)
    with pytest.raises(ValueError, match="older_than"):
        await pg.apply_retention(older_than=float("nan"), keep_labelled=1)


async def test_retention_under_traffic_loses_no_new_record(pg: PostgresStorage, postgres_url: str) -> None:
    """Writes of today's records go on while old days are dropped: every one of them is there
    afterwards."""
    for i in range(20):
        await pg.save_verdict("acme", at_day(f"old{i}", DAY0, 10.0 + i))
    new_day = DAY0 + 5

    async def traffic() -> None:
        for i in range(40):
            await pg.save_verdict("acme", at_day(f"new{i}", new_day, 10.0 + i))
            if i % 3 == 0:
                await pg.set_label("acme", f"new{i}", "A", incr)

    _, report = await asyncio.gather(
        traffic(), pg.apply_retention(older_than=(DAY0 + 1) * DAY_S, keep_labelled=0)
    )
    assert report.dropped == 20
    ids = [r.id async for r in pg.iter_records("acme")]
    assert ids == [f"new{i}" for i in range(40)]
    assert (await pg.read_accumulator("acme", "p1:method:majority"))["n"] == 14.0


# -- export scan -------------------------------------------------------------------------------


async def test_iter_records_pages_in_key_order_with_filters(pg: PostgresStorage) -> None:
    records = []
    for i in range(23):
        tenant = "acme" if i % 3 else "beta"
        record = make_record(
            f"x{i:02d}", tenant=tenant, panel="p1" if i % 2 else "p2",
            created_at=T0 + (i // 2) * 7200.0,  # pairs share a time: the tie goes by (tenant, id)
        )
        records.append(record)
        await pg.save_verdict(tenant, record)
    await pg.set_label("acme", "x01", "A", incr)
    expected = sorted(records, key=lambda r: (r.created_at, r.tenant, r.id))
    got = [r async for r in pg.iter_records(batch_size=4)]
    assert [(r.tenant, r.id) for r in got] == [(r.tenant, r.id) for r in expected]
    acme_p1 = [r.id async for r in pg.iter_records("acme", panel="p1", batch_size=2)]
    assert acme_p1 == [r.id for r in expected if r.tenant == "acme" and r.panel == "p1"]
    window = [r.id async for r in pg.iter_records(since=T0 + 7200.0, until=T0 + 3 * 7200.0)]
    assert window == [r.id for r in expected if T0 + 7200.0 <= r.created_at < T0 + 3 * 7200.0]
    labelled = [r async for r in pg.iter_records(labelled_only=True, batch_size=1)]
    assert [(r.id, r.label) for r in labelled] == [("x01", "A")]
    with pytest.raises(ValueError, match="batch_size"):
        [r async for r in pg.iter_records(batch_size=0)]
    with pytest.raises(ValueError, match="since must be finite"):
        [r async for r in pg.iter_records(since=float("nan"))]
    with pytest.raises(ValueError, match="panel"):
        [r async for r in pg.iter_records(panel="")]


# -- a server restart under an open pool -------------------------------------------------------


async def test_after_a_server_crash_and_restart_calls_succeed_on_fresh_connections() -> None:
    """Every pooled connection dies with the postmaster (kill -9). Once the server is back,
    no call fails for having drawn a dead connection: a connection found dead before anything
    was sent on it is replaced and the call runs on a fresh one; while the server is down,
    calls are StorageUnavailable."""
    from jf_test_support.pg_server import pg_available, start_postgres

    if not pg_available():
        pytest.skip("PostgreSQL server binaries not found (Debian: apt-get install postgresql)")
    server = start_postgres()
    try:
        store = PostgresStorage(server.url(), max_size=6, pool_timeout_s=1)
        await store.open()
        try:
            await asyncio.gather(*(store.save_verdict("acme", make_record(f"b{i}")) for i in range(12)))
            assert store.pool.get_stats().get("pool_size", 0) >= 2  # several connections to go stale
            server.kill()
            with pytest.raises(StorageUnavailable):
                await store.get_verdict("acme", "b0")
            server.start()
            for i in range(12):  # sequential: each call may draw a dead connection first
                assert (await store.get_verdict("acme", f"b{i}")) == make_record(f"b{i}")
            await store.save_verdict("acme", make_record("after"))
            assert (await store.set_label("acme", "after", "A", incr)).status == "labelled"
            assert await store.ping()
        finally:
            await store.close()
    finally:
        server.stop()
