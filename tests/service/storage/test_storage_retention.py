"""Export scans and retention in storage, run on every backend like test_storage.py:
``iter_records`` (order, keyset pages, every filter) and ``apply_retention`` (what goes, what
stays, what is never touched), then what only one backend has (SQLite's incremental vacuum,
Redis's record TTL)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from jf_test_support.storage_support import T0, incr, make_record, stamped
from jf_test_support.waiting import poll_until

from judgefuse.service.storage import SQLiteStorage, Storage, VerdictNotFound, VerdictRecord
from judgefuse.service.storage.redis import RedisStorage
from judgefuse.service.storage.retention import RetentionReport

DAY = 86400.0


async def collect(storage: Storage, tenant: str | None = None, **filters: object) -> list[str]:
    """``tenant/id`` of every record the scan yields, in its order."""
    return [f"{r.tenant}/{r.id}" async for r in storage.iter_records(tenant, **filters)]  # type: ignore[arg-type]


def order_key(record: VerdictRecord) -> tuple[float, str, str]:
    return (record.created_at, record.tenant, record.id)


async def seed_scan(storage: Storage) -> list[VerdictRecord]:
    """Two tenants, two panels, ties in created_at (more than a page), some labelled."""
    records: list[VerdictRecord] = []
    for n in range(23):
        tenant = "acme" if n % 3 else "beta"
        panel = "p1" if n % 2 else "p2"
        # 0..8 share one instant (a tie group bigger than the pages below), then spread out
        created = T0 + (0.0 if n < 9 else n * 10.0)
        records.append(make_record(f"v{n:02d}", tenant=tenant, panel=panel, created_at=created))
    for record in records:
        await storage.save_verdict(record.tenant, record)
    for record in records[::4]:
        labelled = await storage.set_label(record.tenant, record.id, "A", incr)
        records[records.index(record)] = labelled.record
    return records


@pytest.mark.parametrize("batch_size", [1, 4, 1000])
async def test_iter_records_order_and_pages(storage: Storage, batch_size: int) -> None:
    records = await seed_scan(storage)
    expected = [f"{r.tenant}/{r.id}" for r in sorted(records, key=order_key)]
    assert await collect(storage, batch_size=batch_size) == expected
    for tenant in ("acme", "beta"):
        mine = [f"{r.tenant}/{r.id}" for r in sorted(records, key=order_key) if r.tenant == tenant]
        assert await collect(storage, tenant, batch_size=batch_size) == mine
    # the records come back whole, labels included
    got = {r.id: r async for r in storage.iter_records(batch_size=batch_size)}
    assert got == {r.id: r for r in records}


async def test_iter_records_filters(storage: Storage) -> None:
    records = await seed_scan(storage)
    ordered = sorted(records, key=order_key)
    since, until = T0 + 95.0, T0 + 175.0
    cases: list[tuple[str | None, dict[str, object]]] = [
        (None, {"panel": "p1"}),
        ("acme", {"panel": "p2"}),
        (None, {"since": since}),
        (None, {"until": until}),
        ("beta", {"since": since, "until": until}),
        (None, {"labelled_only": True}),
        ("acme", {"labelled_only": True, "panel": "p1"}),
        (None, {"labelled_only": True, "since": T0 + 1.0, "until": until}),
        (None, {"since": T0 + 1e6}),  # nothing
    ]
    for tenant, filters in cases:
        def keep(r: VerdictRecord, tenant: str | None = tenant, f: dict[str, object] = filters) -> bool:
            return ((tenant is None or r.tenant == tenant)
                    and ("panel" not in f or r.panel == f["panel"])
                    and ("since" not in f or r.created_at >= f["since"])  # type: ignore[operator]
                    and ("until" not in f or r.created_at < f["until"])  # type: ignore[operator]
                    and (not f.get("labelled_only") or r.label is not None))
        expected = [f"{r.tenant}/{r.id}" for r in ordered if keep(r)]
        for batch_size in (2, 1000):
            got = await collect(storage, tenant, batch_size=batch_size, **filters)
            assert got == expected, (tenant, filters, batch_size)
    assert await collect(storage, "nobody") == []


async def test_iter_records_refuses_bad_arguments(storage: Storage) -> None:
    for kwargs in ({"batch_size": 0}, {"since": float("nan")}, {"panel": ""}):
        with pytest.raises(ValueError):
            await collect(storage, **kwargs)
    with pytest.raises(ValueError):
        await collect(storage, "bad tenant!")


async def test_iter_records_is_a_stream(storage: Storage) -> None:
    """Pages are fetched as the consumer advances: a record saved after the scan started, past
    the pages already read, still appears (the scan is not a snapshot taken up front)."""
    for n in range(6):
        await storage.save_verdict("acme", make_record(f"a{n}", created_at=T0 + n))
    scan = storage.iter_records("acme", batch_size=2)
    first = await anext(scan)
    await storage.save_verdict("acme", make_record("late", created_at=T0 + 100.0))
    rest = [r.id async for r in scan]
    assert [first.id, *rest] == ["a0", "a1", "a2", "a3", "a4", "a5", "late"]


# -- retention ---------------------------------------------------------------------------------


async def seed_retention(storage: Storage) -> dict[str, set[str]]:
    """Old (day 0) and new (day 10) records of two tenants; returns the ids that must survive
    ``apply_retention(older_than=T0 + 5 days, keep_labelled=2)`` and those that must go."""
    old, new = T0, T0 + 10 * DAY
    survive: set[str] = set()
    gone: set[str] = set()

    async def save(record: VerdictRecord) -> None:
        await storage.save_verdict(record.tenant, record)

    for tenant in ("acme", "beta"):
        for n in range(4):  # old and unlabelled, never queued: go
            await save(make_record(f"{tenant}-old-{n}", tenant=tenant, created_at=old + n))
            gone.add(f"{tenant}/{tenant}-old-{n}")
        await save(make_record(f"{tenant}-new", tenant=tenant, created_at=new))  # new: stays
        survive.add(f"{tenant}/{tenant}-new")
    # pending review (queued, unlabelled), old: stays; one leased, one free
    for n, stratum in enumerate(("review", "audit", "review")):
        record = stamped(f"pend-{n}", stratum, rank=0.1 * (n + 1), created_at=old + 50 + n)
        await save(record)
        survive.add(f"acme/pend-{n}")
    await storage.lease_review("acme", "p1", n=1, annotator="ann", lease_s=60.0, now=old + 100)
    # an old auto-accepted one (stratum none) is not pending: goes
    await save(stamped("none-old", "none", created_at=old + 60))
    gone.add("acme/none-old")
    # labelled, old, panel p1 of acme: 5 of them, the newest 2 (of the whole panel) stay;
    # one newer labelled record on p1 counts in the window too
    for n in range(5):
        await save(make_record(f"lab-{n}", created_at=old + 200 + n))
        await storage.set_label("acme", f"lab-{n}", "A" if n % 2 else "B", incr)
    await save(make_record("lab-new", created_at=new + 1))
    await storage.set_label("acme", "lab-new", "B", incr)
    survive |= {"acme/lab-4", "acme/lab-new"}
    gone |= {f"acme/lab-{n}" for n in range(4)}
    # a labelled, formerly queued record (the label took it out of the queue): an ordinary
    # labelled record of panel p2, alone there, so kept by the window
    await save(stamped("rev-lab", "review", panel="p2", created_at=old + 300))
    await storage.set_label("acme", "rev-lab", "A", incr)
    survive.add("acme/rev-lab")
    # beta p1: 3 old labelled with a tie in created_at; the newest 2 by (created_at, id) stay
    for vid, at in (("b-x", old + 400), ("b-y", old + 400), ("b-a", old + 399)):
        await save(make_record(vid, tenant="beta", created_at=at))
        await storage.set_label("beta", vid, "A", incr, labelled_at=old + 500)
    survive |= {"beta/b-x", "beta/b-y"}
    gone.add("beta/b-a")
    return {"survive": survive, "gone": gone}


async def snapshot(storage: Storage) -> dict[str, object]:
    """Everything retention must not touch: accumulators, review counters, the refit's window."""
    out: dict[str, object] = {}
    for tenant in ("acme", "beta"):
        for key in await storage.list_accumulators(tenant):
            out[f"{tenant}:{key}"] = await storage.read_accumulator(tenant, key)
            out[f"{tenant}:{key}:hours"] = await storage.read_accumulator(
                tenant, key, since_hour=0)
        for panel in ("p1", "p2"):
            stats = await storage.review_stats(tenant, panel, now=T0 + 100)
            out[f"{tenant}:{panel}:stats"] = {s: c.model_dump() for s, c in stats.items()}
    return out


async def test_retention_drops_old_keeps_pending_and_labelled_window(storage: Storage) -> None:
    expect = await seed_retention(storage)
    before = await snapshot(storage)
    window = [r.id for r in await storage.iter_labelled("acme", "p1", limit=2)]
    report = await storage.apply_retention(older_than=T0 + 5 * DAY, keep_labelled=2)
    assert report == RetentionReport(
        dropped=len(expect["gone"]), kept_pending=3, kept_labelled=4  # lab-4, rev-lab, b-x, b-y
    )
    left = set(await collect(storage))
    assert left == expect["survive"]
    for key in expect["gone"]:
        tenant, vid = key.split("/")
        assert await storage.get_verdict(tenant, vid) is None
    assert await snapshot(storage) == before  # accumulators and counters untouched
    # the labelled indexes hold no dangling id, and the refit reads the same window
    assert [r.id for r in await storage.iter_labelled("acme", "p1", limit=2)] == window
    assert await storage.count_labelled("acme", "p1") == 2
    assert await storage.count_labelled("acme") == 3
    assert await storage.count_labelled("beta") == 2
    assert {r.id for r in await storage.iter_labelled("beta")} == {"b-x", "b-y"}
    # the queue still serves every pending item (none dangles, none was lost)
    leased = await storage.lease_review("acme", "p1", n=10, annotator="other", lease_s=60,
                                        now=T0 + 1000)
    assert sorted(lease.record.id for lease in leased) == ["pend-0", "pend-1", "pend-2"]
    # idempotent: a second pass drops nothing and keeps the same
    again = await storage.apply_retention(older_than=T0 + 5 * DAY, keep_labelled=2)
    assert again == RetentionReport(dropped=0, kept_pending=3, kept_labelled=4)
    # a pending record, once labelled, becomes an ordinary labelled record of the window
    await storage.set_label("acme", "pend-0", "A", incr)
    third = await storage.apply_retention(older_than=T0 + 5 * DAY, keep_labelled=2)
    assert third.kept_pending == 2


async def test_retention_keep_labelled_zero_and_nothing_old(storage: Storage) -> None:
    expect = await seed_retention(storage)
    nothing = await storage.apply_retention(older_than=T0 - 1.0, keep_labelled=0)
    assert nothing == RetentionReport(dropped=0, kept_pending=0, kept_labelled=0)
    report = await storage.apply_retention(older_than=T0 + 5 * DAY, keep_labelled=0)
    assert report.kept_labelled == 0 and report.kept_pending == 3
    assert set(await collect(storage)) == {
        "acme/acme-new", "beta/beta-new", "acme/pend-0", "acme/pend-1", "acme/pend-2",
        "acme/lab-new"}
    assert report.dropped == len(expect["gone"]) + 4
    assert await storage.count_labelled("acme") == 1
    assert await storage.count_labelled("beta") == 0


async def test_retention_refuses_bad_arguments(storage: Storage) -> None:
    with pytest.raises(ValueError):
        await storage.apply_retention(older_than=float("inf"), keep_labelled=1)
    with pytest.raises(ValueError):
        await storage.apply_retention(older_than=T0, keep_labelled=-1)


async def test_retention_while_traffic_is_served(storage: Storage) -> None:
    """A pass run concurrently with saves and labels: an old record that got its label (before
    the pass reached it, or between the pass's read and its delete) is kept, every new record
    is kept, and the labelled count equals the records that carry a label."""
    for n in range(300):
        await storage.save_verdict("acme", make_record(f"o{n}", created_at=T0 + n))
    got_label: set[str] = set()

    async def traffic() -> None:
        for n in range(60):
            await storage.save_verdict("acme", make_record(f"n{n}", created_at=T0 + 10 * DAY + n))
            await storage.set_label("acme", f"n{n}", "A", incr)
            try:  # old ones get labels too, racing the pass (it may have deleted them already)
                await storage.set_label("acme", f"o{299 - 3 * n}", "B", incr)
            except VerdictNotFound:
                continue
            got_label.add(f"o{299 - 3 * n}")

    report, _ = await asyncio.gather(
        storage.apply_retention(older_than=T0 + DAY, keep_labelled=1000), traffic())
    left = {r.id: r async for r in storage.iter_records("acme")}
    assert set(left) >= {f"n{n}" for n in range(60)} | got_label
    labelled = [r for r in left.values() if r.label is not None]
    assert await storage.count_labelled("acme") == len(labelled) == 60 + len(got_label)
    assert report.dropped + len(left) - 60 == 300  # every old record either went or is here


# -- SQLite only -------------------------------------------------------------------------------


async def test_sqlite_new_file_vacuums_incrementally(sqlite_path: Path) -> None:
    async with SQLiteStorage(sqlite_path, synchronous="NORMAL") as store:
        for n in range(2000):
            await store.save_verdict("acme", make_record(f"v{n}", created_at=T0 + n))
        size_full = sqlite_path.stat().st_size
        report = await store.apply_retention(older_than=T0 + 1900, keep_labelled=10)
        assert report.dropped == 1900
    with sqlite3.connect(sqlite_path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2  # INCREMENTAL
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert sqlite_path.stat().st_size < size_full / 3, (sqlite_path.stat().st_size, size_full)


async def test_sqlite_old_file_keeps_working_without_vacuum(sqlite_path: Path) -> None:
    """A file created before incremental auto-vacuum: its mode is left alone (no full VACUUM
    behind the operator's back), the scan indexes are added on open, retention still deletes
    and the freed pages stay on the free list for reuse."""
    with sqlite3.connect(sqlite_path) as conn:
        conn.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    async with SQLiteStorage(sqlite_path) as store:
        for n in range(500):
            await store.save_verdict("acme", make_record(f"v{n}", created_at=T0 + n))
        report = await store.apply_retention(older_than=T0 + 400, keep_labelled=10)
        assert report.dropped == 400
        assert len([r async for r in store.iter_records()]) == 100
    with sqlite3.connect(sqlite_path) as conn:
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
        assert conn.execute("PRAGMA freelist_count").fetchone()[0] > 0
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    assert "verdicts_created" in names


# -- Redis only --------------------------------------------------------------------------------


async def test_redis_record_ttl(redis_url: str) -> None:
    """With ``record_ttl_s`` a record that is not queued expires ``record_ttl_s`` after its
    ``created_at``; a queued one never does; a label removes the expiry (labels leave only
    through ``apply_retention``); an expired record's index entry is skipped by the scan and
    removed by the next pass."""
    import time

    now = time.time()
    async with RedisStorage(redis_url, record_ttl_s=3600.0) as store:
        await store.client.flushdb()
        await store.save_verdict("acme", make_record("plain", created_at=now))
        await store.save_verdict("acme", stamped("queued", "review", created_at=now))
        await store.save_verdict("acme", make_record("gone", created_at=now - 3599.5))
        await store.save_verdict("acme", make_record("lab", created_at=now))
        ttl = await store.client.pttl("jf:{acme}:v:plain")
        assert 3590_000 < ttl <= 3600_000
        assert await store.client.pttl("jf:{acme}:v:queued") == -1
        assert await store.client.pttl("jf:{acme}:v:lab") > 0
        await store.set_label("acme", "lab", "A", incr)
        assert await store.client.pttl("jf:{acme}:v:lab") == -1
        # expires within a second of its created_at + ttl
        await poll_until(lambda: _gone(store.client, "jf:{acme}:v:gone"))
        assert [r.id async for r in store.iter_records("acme")] == ["lab", "plain", "queued"]  # one instant: id order
        assert await store.client.zscore("jf:{acme}:records", "gone") is not None
        report = await store.apply_retention(older_than=now - 1000, keep_labelled=5)
        assert report.dropped == 1  # the expired record's index entry
        assert await store.client.zscore("jf:{acme}:records", "gone") is None
        await store.client.flushdb()


async def test_redis_retention_leaves_a_record_that_changed(redis_url: str) -> None:
    """A record labelled between the pass's read and its delete is not deleted (the delete
    checks the record is the one read)."""
    async with RedisStorage(redis_url) as store:
        await store.client.flushdb()
        for n in range(3):
            await store.save_verdict("acme", make_record(f"v{n}", created_at=T0 + n))
        raw = await store.client.get("jf:{acme}:v:v1")
        await store.set_label("acme", "v1", "A", incr)
        import hashlib

        went = await store._drop("acme", [  # noqa: SLF001 (the pass's delete step, driven directly)
            ("v0", hashlib.sha1((await store.client.get("jf:{acme}:v:v0")).encode()).hexdigest(), "p1"),
            ("v1", hashlib.sha1(raw.encode()).hexdigest(), "p1"),
        ])
        assert went == 1
        assert await store.get_verdict("acme", "v1") is not None
        assert await store.count_labelled("acme") == 1
        await store.client.flushdb()


async def test_redis_indexes_records_saved_before_the_index(redis_url: str) -> None:
    """A store written by an older version (records without the ``records`` index or the
    tenant set): ``index_existing_records`` puts them in, once; then scans and retention see
    them."""
    async with RedisStorage(redis_url) as store:
        await store.client.flushdb()
        await store.save_verdict("beta", make_record("new", tenant="beta", created_at=T0 + 5))
        for vid, at in (("old1", T0 + 1), ("old2", T0 + 2)):  # as the older save script wrote them
            await store.client.set(f"jf:{{acme}}:v:{vid}",
                                   make_record(vid, created_at=at).model_dump_json())
        await store.client.set("jf:{acme}:claim:x}:v:y", "replica-1")  # not a record
        assert await collect(store) == ["beta/new"]
        assert await store.index_existing_records() == 3  # the two old and the new one again
        assert await store.index_existing_records() == 0  # marked done
        assert await collect(store) == ["acme/old1", "acme/old2", "beta/new"]
        report = await store.apply_retention(older_than=T0 + 3, keep_labelled=5)
        assert report.dropped == 2
        assert await collect(store) == ["beta/new"]
        await store.client.flushdb()


async def test_sqlite_has_nothing_to_index(sqlite_path: Path) -> None:
    async with SQLiteStorage(sqlite_path) as store:
        await store.save_verdict("acme", make_record("v"))
        assert await store.index_existing_records() == 0


def test_sqlite_scan_pages_are_index_ranges(tmp_path: Path) -> None:
    """Every page of every filter combination is an index range starting at the last key (no
    sort of the matching rows, no rescan from ``since``): what keeps a page's cost independent
    of how far the scan is, and a save's cost at one extra index."""
    import itertools

    from judgefuse.service.storage.sqlite import retention as sqlite_retention

    path = tmp_path / "plan.sqlite3"

    async def create() -> None:
        async with SQLiteStorage(path):
            pass

    asyncio.run(create())
    conn = sqlite3.connect(path)

    class Planner:
        plans: list[str] = []

        def execute(self, sql: str, params: object = ()) -> sqlite3.Cursor:
            rows = conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall()  # type: ignore[arg-type]
            self.plans.append(" | ".join(row[3] for row in rows))
            return conn.execute(sql, params)  # type: ignore[arg-type]

    planner = Planner()
    for tenant, panel, labelled in itertools.product([None, "t"], [None, "p"], [False, True]):
        for after in (None, (1.0, "t", "i")):
            sqlite_retention.record_page(planner, tenant=tenant, panel=panel, since=1.0,  # type: ignore[arg-type]
                                         until=9.0, labelled_only=labelled, after=after, batch=10)
            plan = planner.plans[-1]
            assert plan.startswith("SEARCH") and "TEMP B-TREE" not in plan, plan
            if after is not None:
                assert "(created_at,tenant,id)>" in plan or "(created_at,id)>" in plan, plan
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='index' "
                                            "AND tbl_name='verdicts'")}
    assert names == {"sqlite_autoindex_verdicts_1", "verdicts_panel_labelled", "verdicts_labelled",
                     "verdicts_panel_recent",  # the cold start's newest verdicts of a panel
                     "verdicts_created"}  # one index added for scans and retention
    conn.close()


async def _gone(client, key: str) -> bool:
    """Whether Redis no longer holds ``key`` (its TTL ran out)."""
    return not await client.exists(key)
