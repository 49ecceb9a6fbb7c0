"""The order the precision monitor folds labels in (docs/monitoring.md, 'What it guarantees').

A rebuild folds the stored audit labels in decided-time order, whatever order they arrived in,
and gives exactly the blob that folding them one by one in that order gives. Labels that arrived
out of order leave the same count and total but may sit in other restart windows (the monitor
is not order-invariant; each order is a fixed permutation, so each keeps the alpha guarantee:
benchmarks/bench_monitor_false_alarm.py measures the path with rebuilds). A rebuild lists the
stored labels once, and lists again only when a compare-and-set loser's blob counts a label
the listing lacks (else that label would be lost)."""

from __future__ import annotations

import random
from dataclasses import replace

from jf_test_support import app_support as S
from jf_test_support.monitor_support import World, external_panel, fuse, tuned_and_good

from judgefuse.service.ledger import label_increments
from judgefuse.service.monitoring.monitor import Monitors, monitor_key
from judgefuse.service.monitoring.monitor_state import (
    FoldedLabel,
    MonitorState,
    StoredAlarm,
    counted_labels,
    feed_label,
    in_fold_order,
    refold,
)

TARGET = 0.85


def stream(n: int, seed: int) -> list[FoldedLabel]:
    """``n`` labels decided at times 0..n-1: precise at first, then a drop (so the fold alarms)."""
    rng = random.Random(seed)
    return [FoldedLabel(f"v{i}", rng.random() < (0.95 if i < n // 2 else 0.55), float(i),
                        (("e1", 0.9, True),)) for i in range(n)]


def fed(labels: list[FoldedLabel]) -> MonitorState:
    """Each label's own write, in the given (arrival) order."""
    state = MonitorState.new(TARGET, 0.05, 1)
    for label in labels:
        assert feed_label(state, label, series_points=0) is not None
    return state


def test_a_rebuild_in_any_order_equals_folding_in_decided_order():
    labels = stream(300, seed=1)
    in_order = fed(labels)
    assert in_order.alarm is not None  # the drop alarmed: the alarm label is compared too
    shuffled = labels[:]
    random.Random(2).shuffle(shuffled)
    rebuilt, raised = refold(None, in_fold_order(shuffled), target=TARGET, version=1, alpha=0.05,
                             series_points=0)
    assert raised
    assert rebuilt.precision == in_order.precision
    assert rebuilt.judges == in_order.judges and rebuilt.seen == in_order.seen
    assert rebuilt.alarm == in_order.alarm


def test_out_of_order_arrival_keeps_the_count_and_a_rebuild_restores_the_decided_order():
    labels = stream(300, seed=3)
    rng = random.Random(4)  # each label arrives within ~5 labels of its decision
    arrival = sorted(labels, key=lambda x: x.when + rng.expovariate(1 / 5))
    assert arrival != labels
    by_arrival, in_order = fed(arrival), fed(labels)
    assert counted_labels(by_arrival) == counted_labels(in_order) == 300
    assert by_arrival.precision["total"] == in_order.precision["total"]
    rebuilt, _ = refold(by_arrival, in_fold_order(arrival), target=TARGET, version=1, alpha=0.05,
                        series_points=0)
    assert rebuilt.precision == in_order.precision


def test_a_label_a_rebuild_folded_is_not_fed_again_and_an_alarm_survives_a_refold():
    labels = stream(300, seed=5)
    state, _ = refold(None, labels[:40], target=TARGET, version=1, alpha=0.05, series_points=0)
    before = state.to_json()
    assert feed_label(state, labels[10], series_points=0) is None  # its late own write
    assert state.to_json() == before
    alarmed = replace(MonitorState.new(TARGET, 0.05, 1), alarm=StoredAlarm(1.0, 7, 0.5))
    kept, raised = refold(alarmed, labels[:40], target=TARGET, version=1, alpha=0.05, series_points=0)
    assert kept.alarm == alarmed.alarm and not raised  # no alarm is ever taken back


async def test_a_rebuild_lists_stored_labels_once_and_again_only_for_a_label_it_lacks(storage, tmp_path):
    """Two compare-and-set losses to a write that adds no label: one listing. A loss to another
    replica's label: listed again, and that label is counted (folding the old listing over it
    would have lost it)."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=9)
    world = World(seed=12)
    async with S.running_app(settings, storage) as (app, client):
        version = await tuned_and_good(client, world, 4)
        verdicts = await fuse(client, world, "good", 4)
        for v in verdicts[:3]:  # stored behind the monitor's back
            await storage.set_label("tenant-a", v["id"], world.truth[v["id"]], label_increments)
        monitors: Monitors = app.state.gateway.monitors
        replica = Monitors(settings, storage, storage, storage)  # another gateway on the same store
        threshold = await storage.get_threshold("tenant-a", "ext", version=version)
        key = monitor_key("ext", version)
        listings, conflicts, after_listing = [], [], []
        iter_labelled, get_state = storage.iter_labelled, storage.get_state

        async def listing(tenant, panel):
            listings.append(panel)
            records = await iter_labelled(tenant, panel)
            if after_listing:  # between the rebuild's listing and its compare-and-set
                await after_listing.pop(0)(await get_state(tenant, key))
            return records

        async def racing(tenant, state_key):
            blob = await get_state(tenant, state_key)
            if conflicts and state_key == key:
                write = conflicts.pop(0)
                await write(blob)
            return blob

        async def touch(blob):  # a write that counts nothing new (as a clear of no alarm would)
            assert await storage.put_state("tenant-a", key, blob.body,
                                           expected_version=blob.version) is not None

        async def another_label(blob):
            outcome = await storage.set_label("tenant-a", verdicts[3]["id"],
                                              world.truth[verdicts[3]["id"]], label_increments)
            storage.get_state = get_state  # the replica reads the store as it is
            try:
                await replica.on_label("tenant-a", outcome.record, outcome.record.label, threshold,
                                       on_drift="review_everything")
            finally:
                storage.get_state = racing

        storage.iter_labelled, storage.get_state = listing, racing
        try:
            conflicts[:] = [touch, touch]
            assert await monitors.rebuild("tenant-a", "ext", threshold)
            assert len(listings) == 1 and not conflicts
            listings.clear()
            after_listing[:] = [another_label]
            assert await monitors.rebuild("tenant-a", "ext", threshold)
            assert len(listings) == 2 and not after_listing
        finally:
            storage.iter_labelled, storage.get_state = iter_labelled, get_state
        stored = [r for r in await storage.iter_labelled("tenant-a", "ext")
                  if r.review is not None and r.review.stratum == "audit"
                  and r.threshold_version == version and r.label in ("A", "B")]
        blob = await storage.get_state("tenant-a", key)
        assert counted_labels(MonitorState.from_json(blob.body)) == len(stored)
        assert verdicts[3]["id"] in {r.id for r in stored}


def test_folded_label_order_ties_break_by_verdict_id():
    a, b = FoldedLabel("b", True, 5.0), FoldedLabel("a", False, 5.0)
    assert in_fold_order([a, b, replace(a, verdict_id="c", when=1.0)])[0].verdict_id == "c"
    assert [x.verdict_id for x in in_fold_order([a, b])] == ["a", "b"]
