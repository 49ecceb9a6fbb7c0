"""``Storage.iter_recent``: a panel's newest verdicts, labelled or not (what Dawid-Skene's cold
start reads), on every backend; Redis keeps a bounded index."""

from __future__ import annotations

from jf_test_support.storage_support import T0, label, make_record

from judgefuse.service.storage import Storage
from judgefuse.service.storage.redis import RedisStorage


async def test_iter_recent_order_panel_limit_and_labels(storage: Storage) -> None:
    spec = [("v1", "p1", 5.0), ("v2", "p2", 3.0), ("v3", "p1", 9.0), ("v4", "p1", 1.0), ("v6", "p1", 9.0)]
    for vid, panel, dt in spec:
        await storage.save_verdict("acme", make_record(vid, panel=panel, created_at=T0 + dt))
    await storage.save_verdict("other", make_record("x1", tenant="other", created_at=T0 + 50.0))
    await label(storage, "v3", "B")
    recent = await storage.iter_recent("acme", "p1", limit=10)
    assert [r.id for r in recent] == ["v6", "v3", "v1", "v4"]  # newest first, ties id desc
    assert recent[1].label == "B" and recent[0].label is None  # labelled or not, as stored
    assert [r.id for r in await storage.iter_recent("acme", "p1", limit=2)] == ["v6", "v3"]
    assert [r.id for r in await storage.iter_recent("acme", "p2", limit=5)] == ["v2"]
    assert await storage.iter_recent("acme", "p1", limit=0) == []
    assert await storage.iter_recent("acme", "nope", limit=5) == []
    # saving the identical record again (a retry) adds nothing
    await storage.save_verdict("acme", make_record("v1", panel="p1", created_at=T0 + 5.0))
    assert len(await storage.iter_recent("acme", "p1", limit=10)) == 4


async def test_redis_recent_index_is_bounded(redis_url: str) -> None:
    storage = RedisStorage(redis_url, recent_cap=3)
    await storage.open()
    try:
        await storage.client.flushdb()
        for i in range(6):
            await storage.save_verdict("acme", make_record(f"v{i}", created_at=T0 + i))
        assert [r.id for r in await storage.iter_recent("acme", "p1", limit=10)] == ["v5", "v4", "v3"]
        assert await storage.client.zcard("jf:{acme}:recent:p:p1") == 3
    finally:
        await storage.close()
