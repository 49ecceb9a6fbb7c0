"""The review queue and per-stratum traffic in storage (docs/design.md, 'The review loop'), run on
both backends like test_storage.py: enqueue on save, lease in rank order, expiry, release, the
label that ends a lease, the counters ``review_stats`` reads, traffic increments on save, and
leases that never hand one item to two annotators (also across two handles on one store)."""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from jf_test_support.storage_support import H0, NOW, T0, counts, incr, make_record, stamped

from judgefuse.service.storage import (
    AccumulatorOverflow,
    SQLiteStorage,
    Storage,
    StratumCounts,
    VerdictExists,
)
from judgefuse.service.storage.redis import RedisStorage
from judgefuse.service.storage.sqlite.schema import SCHEMA_VERSION


async def lease_ids(
    storage: Storage, annotator: str, n: int, *, now: float = NOW, lease_s: float = 60.0,
    panel: str = "p1",
) -> list[str]:
    leases = await storage.lease_review(
        "acme", panel, n=n, annotator=annotator, lease_s=lease_s, now=now
    )
    assert all(lease.annotator == annotator for lease in leases)
    assert all(lease.lease_expires_at == now + lease_s for lease in leases)
    return [lease.record.id for lease in leases]


# -- queue order and leases --------------------------------------------------------------------


async def test_leases_follow_rank_and_skip_unqueued(storage: Storage) -> None:
    ranks = {"r1": 0.9, "r2": 0.1, "a1": 0.5, "a2": 0.3, "r3": 0.7}
    for vid, rank in ranks.items():
        await storage.save_verdict("acme", stamped(vid, "audit" if vid[0] == "a" else "review", rank))
    await storage.save_verdict("acme", stamped("n1", "none", 0.0))  # never queued
    await storage.save_verdict("acme", make_record("old"))  # no stamp: never queued
    await storage.save_verdict("acme", stamped("other", "review", 0.0, panel="p2"))

    leases = await storage.lease_review("acme", "p1", n=3, annotator="ann", lease_s=30, now=NOW)
    assert [lease.record.id for lease in leases] == ["r2", "a2", "a1"]
    assert leases[0].record == stamped("r2", "review", 0.1)  # the stored record, stamp and all
    assert leases[0].lease_expires_at == NOW + 30
    assert await lease_ids(storage, "bob", 10) == ["r3", "r1"]
    assert await lease_ids(storage, "carol", 10) == []
    assert await lease_ids(storage, "carol", 10, panel="p2") == ["other"]
    assert await storage.lease_review("globex", "p1", n=5, annotator="x", lease_s=1) == []


async def test_expired_lease_frees_the_item(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v1", "review", 0.2))
    await storage.save_verdict("acme", stamped("v2", "audit", 0.4))
    assert await lease_ids(storage, "alice", 1, lease_s=10.0) == ["v1"]
    assert await lease_ids(storage, "bob", 5, now=NOW + 5.0) == ["v2"]
    stats = await storage.review_stats("acme", "p1", now=NOW + 9.9)
    assert stats["review"] == counts(routed=1, leased=1)
    assert stats["audit"] == counts(routed=1, leased=1)
    # alice's lease ends at NOW + 10: from then on the item is free again
    stats = await storage.review_stats("acme", "p1", now=NOW + 10.0)
    assert stats["review"] == counts(routed=1, queued=1)
    assert await storage.release_review("acme", "v1", "alice", now=NOW + 10.0) is False
    assert await lease_ids(storage, "carol", 5, now=NOW + 10.0) == ["v1"]
    assert await storage.release_review("acme", "v1", "alice", now=NOW + 11.0) is False
    assert await storage.release_review("acme", "v1", "carol", now=NOW + 11.0) is True


async def test_release_returns_the_item_at_its_rank(storage: Storage) -> None:
    for vid, rank in [("v1", 0.1), ("v2", 0.2), ("v3", 0.3)]:
        await storage.save_verdict("acme", stamped(vid, "review", rank))
    assert await lease_ids(storage, "alice", 2) == ["v1", "v2"]
    assert await storage.release_review("acme", "v1", "bob", now=NOW) is False  # not the holder
    assert await storage.release_review("acme", "ghost", "alice", now=NOW) is False
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts(
        routed=3, queued=1, leased=2
    )
    assert await storage.release_review("acme", "v1", "alice", now=NOW) is True
    assert await storage.release_review("acme", "v1", "alice", now=NOW) is False  # already free
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts(
        routed=3, queued=2, leased=1
    )
    assert await lease_ids(storage, "bob", 5) == ["v1", "v3"]  # v1 back before v3


async def test_label_removes_the_item_and_ends_the_lease(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v1", "review", 0.1))
    await storage.save_verdict("acme", stamped("v2", "audit", 0.2))
    await storage.save_verdict("acme", stamped("v3", "review", 0.3))
    assert await lease_ids(storage, "alice", 1) == ["v1"]
    # bob labels the item alice holds (the label wins), then an unleased queued item
    await storage.set_label("acme", "v1", "A", incr, labelled_at=NOW)
    await storage.set_label("acme", "v2", "B", incr, labelled_at=NOW)
    assert await storage.release_review("acme", "v1", "alice", now=NOW) is False
    stats = await storage.review_stats("acme", "p1", now=NOW)
    assert stats["review"] == counts(routed=2, queued=1, labelled=1)
    assert stats["audit"] == counts(routed=1, labelled=1)
    assert await lease_ids(storage, "carol", 5) == ["v3"]
    # a relabel changes no count; the item stays out of the queue
    await storage.set_label("acme", "v1", "B", incr, labelled_at=NOW)
    stats = await storage.review_stats("acme", "p1", now=NOW)
    assert stats["review"] == counts(routed=2, leased=1, labelled=1)
    assert await lease_ids(storage, "dave", 5, now=NOW + 3600) == ["v3"]  # carol's expired


async def test_stats_move_exactly(storage: Storage) -> None:
    empty = {"review": counts(), "audit": counts(), "none": counts(), "inline": counts()}
    assert await storage.review_stats("acme", "p1", now=NOW) == empty
    for i in range(4):
        await storage.save_verdict("acme", stamped(f"r{i}", "review", 0.1 + i / 10))
    for i in range(3):
        await storage.save_verdict("acme", stamped(f"a{i}", "audit", 0.15 + i / 10))
    for i in range(5):
        await storage.save_verdict("acme", stamped(f"n{i}", "none", 0.0))
    await storage.save_verdict("acme", make_record("old"))

    async def expect(review: StratumCounts, audit: StratumCounts, none: StratumCounts) -> None:
        got = await storage.review_stats("acme", "p1", now=NOW)
        assert got == {"review": review, "audit": audit, "none": none, "inline": counts()}

    await expect(counts(4, 4), counts(3, 3), counts(5))
    assert await lease_ids(storage, "alice", 3) == ["r0", "a0", "r1"]
    await expect(counts(4, 2, 2), counts(3, 2, 1), counts(5))
    assert await storage.release_review("acme", "a0", "alice", now=NOW)
    await expect(counts(4, 2, 2), counts(3, 3, 0), counts(5))
    await storage.set_label("acme", "r0", "A", incr, labelled_at=NOW)  # leased
    await storage.set_label("acme", "r3", "A", incr, labelled_at=NOW)  # queued, not leased
    await storage.set_label("acme", "n2", "B", incr, labelled_at=NOW)  # unsolicited
    await storage.set_label("acme", "old", "B", incr, labelled_at=NOW)  # no stamp: not counted
    await expect(counts(4, 1, 1, 2), counts(3, 3, 0), counts(5, 0, 0, 1))
    await storage.set_label("acme", "r0", "B", incr, labelled_at=NOW)  # relabel
    await storage.set_label("acme", "n2", "B", incr, labelled_at=NOW)  # unchanged
    await expect(counts(4, 1, 1, 2), counts(3, 3, 0), counts(5, 0, 0, 1))
    assert await storage.review_stats("acme", "p2", now=NOW) == empty
    assert await storage.review_stats("globex", "p1", now=NOW) == empty


async def test_stats_default_to_the_wall_clock(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v1"))
    leases = await storage.lease_review("acme", "p1", n=1, annotator="ann", lease_s=600)
    assert len(leases) == 1
    assert (await storage.review_stats("acme", "p1"))["review"] == counts(routed=1, leased=1)
    assert await storage.release_review("acme", "v1", "ann") is True


# -- saving: idempotence and traffic increments ------------------------------------------------


def traffic(stratum: str) -> dict[str, dict[str, int]]:
    return {f"p1:traffic:{stratum}": {"n": 1}, "p1:traffic:all": {"n": 1, "w": 10}}


async def test_identical_resave_enqueues_and_counts_once(storage: Storage) -> None:
    record = stamped("v1", "audit", 0.3)
    await storage.save_verdict("acme", record, traffic("audit"))
    await storage.save_verdict("acme", record, traffic("audit"))  # a retried request
    with pytest.raises(VerdictExists):  # a different record under the same id writes nothing
        await storage.save_verdict("acme", stamped("v1", "review", 0.1), traffic("review"))
    assert (await storage.review_stats("acme", "p1", now=NOW))["audit"] == counts(1, 1)
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts()
    assert await storage.read_accumulator("acme", "p1:traffic:audit") == {"n": 1}
    assert await storage.read_accumulator("acme", "p1:traffic:all", since_hour=H0) == {
        "n": 1, "w": 10,
    }
    assert await storage.read_accumulator("acme", "p1:traffic:review") == {}
    assert await lease_ids(storage, "alice", 5) == ["v1"]
    assert await lease_ids(storage, "bob", 5) == []


async def test_save_increments_land_in_the_verdicts_hour(storage: Storage) -> None:
    spec = [("v0", 0, "review"), ("v1", 2, "none"), ("v2", 2, "audit"), ("v3", 5, "none")]
    for vid, offset, stratum in spec:
        created = T0 + offset * 3600.0 + 1.0
        await storage.save_verdict(
            "acme", stamped(vid, stratum, created_at=created), traffic(stratum)
        )
    # a record without a stamp (never queued) may still carry traffic increments
    await storage.save_verdict("acme", make_record("old", created_at=T0 + 1.0), traffic("old"))
    assert await storage.read_accumulator("acme", "p1:traffic:all") == {"n": 5, "w": 50}
    assert await storage.read_accumulator("acme", "p1:traffic:none") == {"n": 2}
    total = await storage.read_accumulator("acme", "p1:traffic:all")
    assert all(type(v) is int for v in total.values())
    assert await storage.read_accumulator("acme", "p1:traffic:all", until_hour=H0 + 1) == {
        "n": 2, "w": 20,
    }
    assert await storage.read_accumulator(
        "acme", "p1:traffic:all", since_hour=H0 + 1, until_hour=H0 + 3
    ) == {"n": 2, "w": 20}
    assert await storage.read_accumulator("acme", "p1:traffic:none", since_hour=H0 + 3) == {
        "n": 1
    }
    assert await storage.read_accumulator("acme", "p1:traffic:old") == {"n": 1}
    assert "p1:traffic:review" in await storage.list_accumulators("acme", prefix="p1:traffic:")
    # bad increments are refused before anything is written
    with pytest.raises(ValueError, match="non-finite"):
        await storage.save_verdict("acme", stamped("bad"), {"k": {"x": float("inf")}})
    assert await storage.get_verdict("acme", "bad") is None
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts(1, 1)


async def test_records_without_a_stamp_are_never_queued(storage: Storage) -> None:
    for i in range(3):
        await storage.save_verdict("acme", make_record(f"old{i}"))  # route human_review
    assert await lease_ids(storage, "alice", 5) == []
    await storage.set_label("acme", "old0", "A", incr, labelled_at=NOW)
    stats = await storage.review_stats("acme", "p1", now=NOW)
    assert stats == {"review": counts(), "audit": counts(), "none": counts(), "inline": counts()}
    assert await storage.release_review("acme", "old1", "alice", now=NOW) is False


async def test_bad_lease_arguments(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v1"))
    for kwargs in (
        {"n": 0, "lease_s": 10.0}, {"n": -2, "lease_s": 10.0}, {"n": True, "lease_s": 10.0},
        {"n": 1.5, "lease_s": 10.0}, {"n": 1, "lease_s": 0.0}, {"n": 1, "lease_s": -5.0},
        {"n": 1, "lease_s": float("nan")}, {"n": 1, "lease_s": float("inf")},
    ):
        with pytest.raises(ValueError, match="n must|lease_s"):
            await storage.lease_review("acme", "p1", annotator="ann", now=NOW, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="annotator"):
        await storage.lease_review("acme", "p1", n=1, annotator="", lease_s=1.0)
    with pytest.raises(ValueError, match="panel"):
        await storage.lease_review("acme", "", n=1, annotator="ann", lease_s=1.0)
    with pytest.raises(ValueError, match="tenant"):
        await storage.review_stats("bad{tenant}", "p1")
    with pytest.raises(ValueError, match="annotator"):
        await storage.release_review("acme", "v1", "")
    # nothing was leased by the refused calls; any integral n is accepted (numpy's too)
    assert await lease_ids(storage, "ann", np.int64(5)) == ["v1"]  # type: ignore[arg-type]


# -- concurrency -------------------------------------------------------------------------------


async def _lease_race(stores: list[Storage], calls: int, n: int) -> list[list[str]]:
    async def one(i: int) -> list[str]:
        leases = await stores[i % len(stores)].lease_review(
            "acme", "p1", n=n, annotator=f"ann{i}", lease_s=60.0, now=NOW
        )
        return [lease.record.id for lease in leases]

    return await asyncio.gather(*(one(i) for i in range(calls)))


async def _fill(store: Storage, items: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    ranks = {f"v{i:02d}": rng.random() for i in range(items)}
    for vid, rank in ranks.items():
        await store.save_verdict("acme", stamped(vid, rng.choice(["review", "audit"]), rank))
    return ranks


async def test_concurrent_leases_never_share_an_item(storage: Storage) -> None:
    ranks = await _fill(storage, 40, seed=1)
    got = await _lease_race([storage], calls=20, n=3)
    leased = [vid for ids in got for vid in ids]
    assert len(leased) == len(set(leased)) == 40  # 20 x 3 asked, all 40 handed out once
    assert all(len(ids) <= 3 for ids in got)
    for ids in got:  # each caller got its items in rank order
        assert ids == sorted(ids, key=ranks.__getitem__)
    stats = await storage.review_stats("acme", "p1", now=NOW)
    assert stats["review"].leased + stats["audit"].leased == 40
    assert stats["review"].queued == stats["audit"].queued == 0


async def test_concurrent_leases_across_two_handles(two_handles: tuple[Storage, Storage]) -> None:
    one, two = two_handles
    await _fill(one, 40, seed=2)
    got = await _lease_race([one, two], calls=20, n=3)
    leased = [vid for ids in got for vid in ids]
    assert len(leased) == len(set(leased)) == 40
    # and a second race after every lease expired hands each item out exactly once again
    later = NOW + 3600.0

    async def one_call(i: int) -> list[str]:
        store = two_handles[i % 2]
        leases = await store.lease_review(
            "acme", "p1", n=7, annotator=f"b{i}", lease_s=60.0, now=later
        )
        return [lease.record.id for lease in leases]

    again = await asyncio.gather(*(one_call(i) for i in range(12)))
    relisted = [vid for ids in again for vid in ids]
    assert len(relisted) == len(set(relisted)) == 40


async def test_concurrent_label_and_lease(storage: Storage) -> None:
    """Labels racing leases: a labelled item is never leased afterwards, and the counters
    end consistent (every item either labelled or still queued, never both)."""
    await _fill(storage, 30, seed=3)
    labels = [storage.set_label("acme", f"v{i:02d}", "A", incr, labelled_at=NOW)
              for i in range(0, 30, 2)]
    leases = [storage.lease_review("acme", "p1", n=2, annotator=f"a{i}", lease_s=60.0, now=NOW)
              for i in range(10)]
    await asyncio.gather(*labels, *leases)
    stats = await storage.review_stats("acme", "p1", now=NOW)
    labelled = stats["review"].labelled + stats["audit"].labelled
    waiting = sum(stats[s].queued + stats[s].leased for s in ("review", "audit"))
    assert labelled == 15 and waiting == 15
    after = await storage.lease_review(
        "acme", "p1", n=30, annotator="late", lease_s=60.0, now=NOW + 3600.0
    )
    assert sorted(lease.record.id for lease in after) == [f"v{i:02d}" for i in range(1, 30, 2)]


# -- SQLite: a version-1 file ------------------------------------------------------------------

_V1_SCHEMA = """
CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE verdicts (tenant TEXT NOT NULL, id TEXT NOT NULL, panel TEXT NOT NULL,
    created_at REAL NOT NULL, label TEXT, labelled_at REAL, body TEXT NOT NULL,
    PRIMARY KEY (tenant, id));
CREATE INDEX verdicts_panel_labelled ON verdicts (tenant, panel, created_at, id)
    WHERE label IS NOT NULL;
CREATE INDEX verdicts_labelled ON verdicts (tenant, created_at, id) WHERE label IS NOT NULL;
CREATE TABLE acc_total (tenant TEXT NOT NULL, key TEXT NOT NULL, field TEXT NOT NULL,
    value NOT NULL, PRIMARY KEY (tenant, key, field));
CREATE TABLE acc_hour (tenant TEXT NOT NULL, key TEXT NOT NULL, hour INTEGER NOT NULL,
    field TEXT NOT NULL, value NOT NULL, PRIMARY KEY (tenant, key, hour, field));
CREATE TABLE thresholds (tenant TEXT NOT NULL, panel TEXT NOT NULL, version INTEGER NOT NULL,
    created_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, panel, version));
CREATE TABLE models (tenant TEXT NOT NULL, panel TEXT NOT NULL, version INTEGER NOT NULL,
    created_at REAL NOT NULL, body TEXT NOT NULL, PRIMARY KEY (tenant, panel, version));
INSERT INTO meta (name, value) VALUES ('schema', '1');
"""


async def test_sqlite_version_1_file_is_migrated(sqlite_path: Path) -> None:
    old = make_record("old1")
    body = old.model_dump_json(exclude={"review", "threshold_version"})  # as version 1 wrote it
    assert '"review"' not in body
    conn = sqlite3.connect(sqlite_path)
    try:
        conn.executescript(_V1_SCHEMA)
        conn.execute(
            "INSERT INTO verdicts (tenant, id, panel, created_at, label, labelled_at, body) "
            "VALUES ('acme', 'old1', 'p1', ?, NULL, NULL, ?)", (old.created_at, body),
        )
        conn.execute("INSERT INTO acc_total VALUES ('acme', 'k', 'n', 7)")
        conn.commit()
    finally:
        conn.close()

    async with SQLiteStorage(sqlite_path) as store:
        assert await store.get_verdict("acme", "old1") == old  # no stamp, no threshold version
        assert await store.read_accumulator("acme", "k") == {"n": 7}
        assert await lease_ids(store, "ann", 5) == []  # old records are never queued
        assert (await store.set_label("acme", "old1", "A", incr)).status == "labelled"
        await store.save_verdict("acme", stamped("new1", "review", 0.4), {"k": {"n": 1}})
        assert await lease_ids(store, "ann", 5) == ["new1"]
        assert (await store.review_stats("acme", "p1", now=NOW))["review"] == counts(1, 0, 1)
        assert await store.read_accumulator("acme", "k") == {"n": 8}

    conn = sqlite3.connect(sqlite_path)
    try:
        assert conn.execute("SELECT value FROM meta WHERE name = 'schema'").fetchone()[0] == str(
            SCHEMA_VERSION
        )
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"review_queue", "review_counts", "review_queue_rank", "review_queue_leases"} <= names
    finally:
        conn.close()
    async with SQLiteStorage(sqlite_path) as again:  # reopening a migrated file changes nothing
        assert (await again.review_stats("acme", "p1", now=NOW))["review"] == counts(1, 0, 1)


async def test_overflowing_save_writes_nothing(storage: Storage) -> None:
    await storage.save_verdict("acme", stamped("v1"), {"k": {"x": 2**62}})
    with pytest.raises(AccumulatorOverflow):
        await storage.save_verdict("acme", stamped("v2", rank=0.1), {"a": {"n": 1}, "k": {"x": 2**62}})
    assert await storage.get_verdict("acme", "v2") is None
    assert await storage.read_accumulator("acme", "a") == {}
    assert await storage.read_accumulator("acme", "k") == {"x": 2**62}
    assert (await storage.review_stats("acme", "p1", now=NOW))["review"] == counts(1, 1)
    assert await lease_ids(storage, "ann", 5) == ["v1"]
    await storage.save_verdict("acme", stamped("v2", rank=0.1), {"a": {"n": 1}})  # now it fits
    assert await lease_ids(storage, "bob", 5) == ["v2"]


# -- Redis: key naming -------------------------------------------------------------------------


async def test_redis_review_keys_carry_the_tenant_tag(redis_url: str) -> None:
    async with RedisStorage(redis_url) as store:
        await store.client.flushdb()
        await store.save_verdict("acme", stamped("v1", "review", 0.1, panel="p:x"))
        await store.save_verdict("acme", stamped("v2", "audit", 0.2, panel="p:x"))
        await store.lease_review("acme", "p:x", n=2, annotator="ann", lease_s=60.0, now=NOW)
        keys = set(await store.client.keys("*"))
        assert await store.client.hgetall("jf:{acme}:review:owner:p:x") == {
            "v1": "ann", "v2": "ann"
        }
        # an expired lease is swept by the next lease call: no owner left behind
        await store.lease_review("acme", "p:x", n=1, annotator="bob", lease_s=1.0, now=NOW + 61)
        assert await store.client.hgetall("jf:{acme}:review:owner:p:x") == {"v1": "bob"}
        assert await store.client.zcard("jf:{acme}:review:leases:audit:p:x") == 0
        await store.client.flushdb()
    # the tenant set (scans over every tenant) is the one key outside a tenant's slot
    assert all(k.startswith("jf:{acme}:") for k in keys if k != "jf:tenants")
    assert {
        "jf:{acme}:review:queue:p:x", "jf:{acme}:review:stratum:p:x",
        "jf:{acme}:review:owner:p:x", "jf:{acme}:review:leases:review:p:x",
        "jf:{acme}:review:leases:audit:p:x", "jf:{acme}:review:counts:p:x",
    } <= keys


async def test_reads_after_save_increments_are_current(storage: Storage) -> None:
    """A read answered before a save (SQLite caches answers) still sees the save's increments."""
    key = "p1:traffic:all"
    await storage.save_verdict("acme", stamped("v0"), {key: {"n": 1, "w": 0.5}})
    assert await storage.read_accumulator("acme", key) == {"n": 1, "w": 0.5}
    assert await storage.read_accumulator("acme", key, since_hour=H0) == {"n": 1, "w": 0.5}
    assert await storage.read_accumulator("acme", key, until_hour=H0 + 1) == {"n": 1, "w": 0.5}
    await storage.save_verdict("acme", stamped("v1"), {key: {"n": 2, "w": 0.25}})
    await storage.save_verdict(
        "acme", stamped("v2", created_at=T0 + 7200.0), {key: {"n": 4, "w": 0.125}}
    )
    assert await storage.read_accumulator("acme", key) == {"n": 7, "w": 0.875}
    assert await storage.read_accumulator("acme", key, since_hour=H0) == {"n": 7, "w": 0.875}
    assert await storage.read_accumulator("acme", key, until_hour=H0 + 1) == {"n": 3, "w": 0.75}
    await storage.save_verdict("acme", stamped("v2", created_at=T0 + 7200.0), {key: {"n": 99}})
    assert await storage.read_accumulator("acme", key, since_hour=H0 + 1) == {"n": 4, "w": 0.125}


async def test_inline_stamps_are_counted_never_queued(storage: Storage) -> None:
    """A verdict whose request carried its label (stratum ``inline``) is counted, never
    queued, and its label counts in its own stratum."""
    await storage.save_verdict("acme", stamped("in1", "inline", 0.1))
    await storage.save_verdict("acme", stamped("rv1", "review", 0.2))
    assert await lease_ids(storage, "ann", 5) == ["rv1"]
    await storage.set_label("acme", "in1", "A", incr, labelled_at=NOW)
    stats = await storage.review_stats("acme", "p1", now=NOW)
    assert stats["inline"] == counts(routed=1, labelled=1)
    assert stats["review"] == counts(routed=1, leased=1)
