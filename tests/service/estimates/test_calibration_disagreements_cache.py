"""``GET /v1/calibration``'s disagreement list reads the labelled verdicts again only when a label
changed: on a real SQLite file, over real HTTP, a storage that counts its labelled-record reads
sees one read for any number of polls without a new label, and one more after each label,
relabel, undo and tie label, each of which changes the list the next poll shows."""

from __future__ import annotations

import httpx
from jf_test_support import app_support as S
from jf_test_support.panel_support import PAIR, H, external_panel, votes

from judgefuse.service.app import create_app
from judgefuse.service.estimates.disagreements import DISAGREEMENT_SCAN, MAX_AGE_S, DisagreementCache
from judgefuse.service.ledger import label_increments
from judgefuse.service.storage.sqlite import SQLiteStorage

TENANT = "tenant-a"
QUIET = {"panel": "ext", "structure": "false", "population": "false"}
"""Only the disagreement list reads labelled records (the panel structure reads them too)."""


class CountingSQLite(SQLiteStorage):
    """SQLite that counts the disagreement list's reads of the labelled records."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scans = 0

    async def _iter_labelled(self, tenant, panel, limit):
        if limit == DISAGREEMENT_SCAN:
            self.scans += 1
        return await super()._iter_labelled(tenant, panel, limit)


async def _fuse(client: httpx.AsyncClient, vid: str, *choices: str, confidence: float) -> None:
    r = await client.post("/v1/fuse", json={**PAIR, "id": vid, "votes": votes(*choices, confidence=confidence)},
                          headers=H)  # fmt: skip
    assert r.status_code == 200, r.text


async def _label(client: httpx.AsyncClient, vid: str, label: str) -> str:
    r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": label}, headers=H)
    assert r.status_code == 200, r.text
    return r.json()["status"]


async def _missed(client: httpx.AsyncClient, **params: object) -> list[str]:
    r = await client.get("/v1/calibration", params={**QUIET, **params}, headers=H)
    assert r.status_code == 200, r.text
    return [d["id"] for d in r.json()["disagreements"]["items"]]


async def test_polls_without_a_new_label_do_not_read_the_records_again(tmp_path):
    storage = CountingSQLite(tmp_path / "judgefuse.db")
    await storage.open()
    try:
        settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
        app = create_app(settings, storage=storage)
        async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:
            await _fuse(client, "v0", "A", "A", "A", confidence=0.9)
            await _fuse(client, "v1", "A", "A", "B", confidence=0.8)
            await _fuse(client, "v2", "B", "B", "A", confidence=0.7)  # a 2-1 majority: less confident
            for vid, label in (("v0", "B"), ("v1", "A"), ("v2", "A")):
                await _label(client, vid, label)

            assert await _missed(client) == ["v0", "v2"]  # fused A/B answers the label contradicts
            assert storage.scans == 1
            for _ in range(5):
                assert await _missed(client) == ["v0", "v2"]
            assert await _missed(client, disagreements=1) == ["v0"]
            assert await _missed(client, window_hours=0) == ["v0", "v2"]
            await _fuse(client, "v3", "B", "B", "B", confidence=0.95)  # judged, not labelled: no change
            assert await _missed(client) == ["v0", "v2"]
            assert storage.scans == 1  # eight polls, one read

            assert await _label(client, "v3", "A") == "labelled"  # a new miss, as confident as v0 and newer
            assert await _missed(client) == ["v3", "v0", "v2"]
            assert storage.scans == 2
            assert await _missed(client) == ["v3", "v0", "v2"] and storage.scans == 2

            # a relabel keeps the labelled count: the agreement counters tell it
            assert await _label(client, "v0", "A") == "relabelled"
            assert await _missed(client) == ["v3", "v2"]
            assert storage.scans == 3
            assert await _label(client, "v2", "tie") == "relabelled"  # a tie label is no A/B label
            assert await _missed(client) == ["v3"]
            record = await storage.get_verdict(TENANT, "v3")
            assert await storage.undo_label(TENANT, "v3", label_increments, labelled_at=record.labelled_at,
                                            annotator="ann", lease_s=60)  # fmt: skip
            assert await _missed(client) == []
            assert storage.scans == 5
            # the response's shape is the route's, as before
            body = (await client.get("/v1/calibration", params=QUIET, headers=H)).json()["disagreements"]
            assert body == {"scanned": 2, "items": []}
    finally:
        await storage.close()


async def test_a_read_is_reused_at_most_max_age_and_per_panel(tmp_path):
    """The one change the counters could miss is bounded by the read's age; each (tenant, panel)
    has its own read."""
    storage = CountingSQLite(tmp_path / "judgefuse.db")
    await storage.open()
    now = [1000.0]
    cache = DisagreementCache(clock=lambda: now[0])
    try:
        for panel in ("ext", "other"):
            assert await cache.get(storage, TENANT, panel, since=None, limit=10) == {"scanned": 0, "items": []}
        assert storage.scans == 2
        await cache.get(storage, TENANT, "ext", since=None, limit=10)
        now[0] += MAX_AGE_S - 1
        await cache.get(storage, TENANT, "ext", since=None, limit=10)
        assert storage.scans == 2
        now[0] += 1
        await cache.get(storage, TENANT, "ext", since=None, limit=10)
        assert storage.scans == 3
    finally:
        await storage.close()
