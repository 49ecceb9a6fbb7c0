"""Ties, both-bad and undos never reach the precision monitor (every storage backend): an audit
verdict's monitor is fed its first A/B label only, whether a tie or both-bad came first, and an
undone and corrected label is not fed again (a sequential test cannot take one back)."""

from __future__ import annotations

from jf_test_support import app_support as S
from jf_test_support.monitor_support import H, World, external_panel, fuse, tuned_and_good


async def _fed(client) -> int:
    state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
    return state["precision"]["labels"]


async def test_only_a_verdicts_first_decided_label_feeds_the_monitor(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=2)
    world = World(seed=1)
    async with S.running_app(settings, storage) as (app, client):
        await tuned_and_good(client, world, 0)
        first, second = await fuse(client, world, "good", 2)
        assert first["review"]["stratum"] == second["review"]["stratum"] == "audit"
        base = await _fed(client)

        async def label(vid: str, kind: str) -> dict:
            r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": kind}, headers=H)
            assert r.status_code == 200, r.text
            return r.json()

        await label(first["id"], "tie")
        await label(first["id"], "both_bad")
        assert await _fed(client) == base  # no preference: nothing for the monitor
        await label(first["id"], "A")
        assert await _fed(client) == base + 1  # its first A/B label
        await label(first["id"], "tie")
        await label(first["id"], "B")
        assert await _fed(client) == base + 1

        given = await label(second["id"], "B")
        assert await _fed(client) == base + 2
        labels = app.state.gateway.labels
        undone = await labels.undo("tenant-a", second["id"], labelled_at=given["labelled_at"],
                                   annotator="ann", lease_s=60)
        assert undone is not None and undone.label is None
        await label(second["id"], "A")  # the correction after an undo is not fed again
        assert await _fed(client) == base + 2
