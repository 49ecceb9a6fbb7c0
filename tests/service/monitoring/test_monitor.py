"""Guarantees that hold over time, through the app on both storage backends:
traffic through /v1/fuse (a panel of external judges), a threshold tuned on the labels of a
simulated annotator working the review queue (/v1/review/next + /v1/feedback), then the votes'
accuracy drops: the precision monitor alarms, the next verdicts go to human review with the
alarm named (``drift_alarm``), /v1/monitor shows the event with its evidence, and a retune (or
an operator's clear) ends it. Two gateways sharing one Redis see the same alarm. Also: no
alarm on a drift-free stream of a few hundred audit labels, relabels that never count twice,
the monitor's state round-tripping through both backends, and bad input named clearly."""

from __future__ import annotations

import random

import pytest
from jf_test_support import app_support as S
from jf_test_support.monitor_support import EXT, PAIR, TARGET, H, World, external_panel, fuse, tune, tuned_and_good

from judgefuse.judges.config import PanelConfigError, load_panel_config
from judgefuse.service.storage import MonitorEvent, ThresholdRecord
from judgefuse.service.storage.redis import RedisStorage


async def drift_until_alarm(client, world: World, limit: int = 600) -> int:
    """Drifted traffic in batches of 20, annotated, until /v1/monitor says alarm."""
    sent = 0
    while sent < limit:
        await fuse(client, world, "drift", 20)
        sent += 20
        await world.annotate(client)
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        if state["state"] == "alarm":
            return sent
    pytest.fail(f"no alarm after {sent} drifted verdicts")


async def test_drop_alarms_routes_to_review_shows_the_event_and_a_retune_clears_it(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=11)
    world = World(seed=3)
    async with S.running_app(settings, storage) as (_app, client):
        version = await tuned_and_good(client, world, 200)
        ok = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert ok["state"] == "ok" and ok["threshold_version"] == version
        assert ok["target"] == TARGET and ok["events"] == []
        assert ok["precision"]["labels"] >= 60  # ~half of 200 audited at rate 0.5
        assert ok["precision"]["upper"] >= TARGET and ok["precision"]["estimate"] == 1.0
        sent = await drift_until_alarm(client, world)
        alarm = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        [event] = alarm["events"]
        print(f"alarm within {sent} drifted verdicts, at audit label {event['evidence']['labels']}; "
              f"upper bound {event['evidence']['upper']:.3f} < target {TARGET}")
        assert event["kind"] == "alarm" and event["action"] == "review_everything"
        assert event["threshold_version"] == version and "drift_alarm" in event["reason"]
        evidence = event["evidence"]
        assert evidence["upper"] < TARGET and evidence["labels"] > 0 and evidence["target"] == TARGET
        assert alarm["series"] and alarm["series"][-1][1] == alarm["precision"]["labels"]
        assert set(alarm["judges"]) == set(EXT)  # Brier (labels) and vote drift (no labels) per judge
        assert alarm["judges"]["e1"]["brier"]["monitored"] >= 0
        # the next verdicts, unanimous (confidence 1.0 >= threshold 1.0), go to human review
        for verdict in await fuse(client, world, "good", 5):
            assert verdict["route"] == "human_review"
            assert verdict["threshold"]["code"] == "drift_alarm"
            assert "alarmed" in verdict["threshold"]["reason"]
            assert verdict["review"]["reason"] == "drift_alarm" and verdict["review"]["stratum"] == "review"
        metrics = (await client.get("/metrics", headers=H)).text
        assert 'judgefuse_monitor_alarm{panel="ext",tenant="tenant-a"} 1.0' in metrics
        assert "judgefuse_monitor_precision_upper" in metrics
        page = (await client.get("/console/calibration", headers=H)).text
        assert "drift alarm" in page.lower()
        # a retune starts a new threshold version: a new monitor, no alarm, no drift_alarm route
        retuned = await tune(client)
        assert retuned["stored"] and retuned["version"] == version + 1
        after = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert after["state"] == "ok" and after["threshold_version"] == version + 1
        assert after["precision"]["labels"] == 0 and len(after["events"]) == 1
        for verdict in await fuse(client, world, "good", 3):
            assert verdict["threshold"]["code"] != "drift_alarm"
            assert verdict["threshold"]["version"] == version + 1


async def test_operator_clear_ends_the_alarm_and_alert_only_never_reroutes(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, on_drift="alert_only")],
                               review_seed=5)
    world = World(seed=8)
    async with S.running_app(settings, storage) as (_app, client):
        await tuned_and_good(client, world, 60)
        await drift_until_alarm(client, world)
        # alert_only: the alarm is on record, routes are untouched
        for verdict in await fuse(client, world, "good", 5):
            assert verdict["route"] == "auto_accept"
        r = await client.post("/v1/monitor/clear", json={"panel": "ext"}, headers=H)
        assert r.status_code == 200, r.text
        assert r.json()["cleared"] is True and r.json()["event"]["kind"] == "clear"
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert state["state"] == "ok" and state["restarts"] == 1 and state["precision"]["labels"] == 0
        assert [e["kind"] for e in state["events"]] == ["alarm", "clear"]
        assert [e["version"] for e in state["events"]] == [1, 2]
        again = await client.post("/v1/monitor/clear", json={"panel": "ext"}, headers=H)
        assert again.json()["cleared"] is False  # nothing in alarm: nothing written


async def test_raise_threshold_reviews_below_the_raised_threshold_only(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, on_drift="raise_threshold")],
                               review_seed=9)
    world = World(seed=4)
    async with S.running_app(settings, storage) as (_app, client):
        # threshold 0.6: split verdicts (majority confidence 2/3) are auto-accepted too
        await storage.put_threshold("tenant-a", "ext", ThresholdRecord(
            panel="ext", threshold=0.6, created_at=1.0, method="majority",
            target_precision=TARGET, delta=0.1))
        [split] = await fuse(client, world, "split", 1)
        assert split["route"] == "auto_accept"
        await fuse(client, world, "good", 60)
        await world.annotate(client)
        await drift_until_alarm(client, world)
        # raised halfway to 1: 0.8. Split verdicts (0.667) now go to review, unanimous (1.0) stay
        [split] = await fuse(client, world, "split", 1)
        assert split["route"] == "human_review" and split["threshold"]["code"] == "drift_alarm"
        assert "raised threshold 0.8000" in split["threshold"]["reason"]
        assert split["review"]["reason"] == "drift_alarm"
        [good] = await fuse(client, world, "good", 1)
        assert good["route"] == "auto_accept" and "raised threshold" in good["threshold"]["reason"]
        events = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()["events"]
        assert [e["action"] for e in events] == ["raise_threshold"]


async def test_no_alarm_on_a_drift_free_stream_of_hundreds_of_audit_labels(storage, tmp_path):
    # precision at the target's edge would be the hardest case; here ~0.9 (every auto-accepted
    # verdict is right 90% of the time): 400 verdicts at audit rate 1.0
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=2)
    world = World(seed=6)
    async with S.running_app(settings, storage) as (app, client):
        await tuned_and_good(client, world, 0)
        rng = random.Random(1)
        for _ in range(400):
            item = world.item("good")
            if rng.random() < 0.1:  # wrong label for 10%: precision 0.9 > target 0.8
                world.truth[item["id"]] = "B" if world.truth[item["id"]] == "A" else "A"
            assert (await client.post("/v1/fuse", json=item, headers=H)).json()["route"] == "auto_accept"
        await world.annotate(client)
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        print(f"drift-free: {state['precision']['labels']} audit labels, estimate "
              f"{state['precision']['estimate']:.3f}, upper {state['precision']['upper']:.3f}: "
              f"{state['state']} (target {TARGET})")
        assert state["precision"]["labels"] == 400
        assert state["state"] == "ok" and state["events"] == []


async def test_a_relabel_never_counts_twice(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=2)
    world = World(seed=1)
    async with S.running_app(settings, storage) as (_app, client):
        await tuned_and_good(client, world, 0)
        [verdict] = await fuse(client, world, "good", 1)
        assert verdict["review"]["stratum"] == "audit"
        vid = verdict["id"]
        for label in ("A", "B", "A", "A"):
            r = await client.post("/v1/feedback", json={"verdict_id": vid, "label": label}, headers=H)
            assert r.status_code == 200
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert state["precision"]["labels"] == 1


async def test_two_replicas_sharing_redis_see_the_same_alarm(redis_url, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=13)
    one, two = RedisStorage(redis_url), RedisStorage(redis_url)
    await one.open()
    await two.open()
    await one.client.flushdb()
    world = World(seed=21)
    try:
        async with S.running_app(settings, one) as (_a, c1), S.running_app(settings, two) as (_b, c2):
            await fuse(c1, world, "good", 100)
            await fuse(c2, world, "split", 60)
            await world.annotate(c2)
            assert (await tune(c1))["threshold"] == 1.0
            await fuse(c2, world, "good", 100)
            await world.annotate(c1)
            sent = 0
            while sent < 600:  # traffic on replica 1, labels through replica 2
                await fuse(c1, world, "drift", 20)
                sent += 20
                await world.annotate(c2)
                if (await c1.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()["state"] == "alarm":
                    break
            views = [(await c.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json() for c in (c1, c2)]
            assert views[0]["state"] == views[1]["state"] == "alarm"
            assert views[0]["precision"] == views[1]["precision"]
            assert views[0]["events"] == views[1]["events"] and len(views[0]["events"]) == 1
            for client in (c1, c2):  # both replicas route to review
                r = await client.post("/v1/fuse", json=world.item("good"), headers=H)
                assert r.json()["threshold"]["code"] == "drift_alarm"
    finally:
        await one.close()
        await two.close()


async def test_monitor_state_round_trips_through_storage_with_compare_and_set(storage):
    assert await storage.get_state("tenant-a", "monitor/ext/1") is None
    assert await storage.put_state("tenant-a", "monitor/ext/1", {"x": 1}, expected_version=1) is None
    assert await storage.put_state("tenant-a", "monitor/ext/1", {"x": 1}, expected_version=0) == 1
    assert await storage.put_state("tenant-a", "monitor/ext/1", {"x": 2}, expected_version=0) is None
    assert await storage.put_state("tenant-a", "monitor/ext/1", {"x": 3, "y": [1.5, None]},
                                   expected_version=1) == 2
    blob = await storage.get_state("tenant-a", "monitor/ext/1")
    assert blob.version == 2 and blob.body == {"x": 3, "y": [1.5, None]}
    assert await storage.get_state("tenant-b", "monitor/ext/1") is None  # tenants apart
    with pytest.raises(ValueError, match="expected_version"):
        await storage.put_state("tenant-a", "k", {}, expected_version=-1)
    with pytest.raises(ValueError):
        await storage.put_state("tenant-a", "k", {"nan": float("nan")}, expected_version=0)
    for kind in ("alarm", "clear"):
        await storage.put_monitor_event("tenant-a", "ext", MonitorEvent(
            panel="ext", created_at=1.0, kind=kind, threshold_version=1, action="alert_only",
            evidence={"upper": 0.7}))
    events = await storage.monitor_events("tenant-a", "ext")
    assert [(e.version, e.kind) for e in events] == [(1, "alarm"), (2, "clear")]
    assert [e.version for e in await storage.monitor_events("tenant-a", "ext", limit=1)] == [2]


async def test_concurrent_labels_on_one_monitor_are_all_counted(storage, tmp_path):
    """Compare-and-set under contention: concurrent audit labels all land exactly once."""
    import asyncio

    settings = S.make_settings(tmp_path, [external_panel(tmp_path, audit_rate=1.0)], review_seed=2)
    world = World(seed=1)
    async with S.running_app(settings, storage) as (_app, client):
        await tuned_and_good(client, world, 0)
        verdicts = await fuse(client, world, "good", 40)

        async def label(v):
            r = await client.post("/v1/feedback", json={"verdict_id": v["id"],
                                                        "label": world.truth[v["id"]]}, headers=H)
            assert r.status_code == 200

        await asyncio.gather(*(label(v) for v in verdicts))
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert state["precision"]["labels"] == 40


async def test_bad_input_is_named(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=1)
    async with S.running_app(settings) as (_app, client):
        r = await client.get("/v1/monitor", params={"panel": "nope"}, headers=H)
        assert r.status_code == 422 and "query.panel" in r.text and "nope" in r.text
        r = await client.post("/v1/monitor/clear", json={"panel": "nope"}, headers=H)
        assert r.status_code == 422 and "body.panel" in r.text
        r = await client.post("/v1/monitor/clear", json={"panel": "ext"}, headers=H)
        assert r.status_code == 422 and "no threshold" in r.text
        r = await client.post("/v1/monitor/clear", json={"panel": "ext", "extra": 1}, headers=H)
        assert r.status_code == 422
    bad = external_panel(tmp_path, on_drift="panic")
    with pytest.raises(PanelConfigError, match=r"panel-ext-panic\.yaml.*on_drift") as err:
        load_panel_config(bad)
    assert "review_everything" in str(err.value)  # says what is allowed
    with pytest.raises(PanelConfigError, match="label_budget_per_day"):
        load_panel_config(external_panel(tmp_path, extra="label_budget_per_day: -3\n"))
    # a bad panel file stops the app at startup, naming the file and the field
    with pytest.raises(Exception, match="on_drift"):
        async with S.running_app(S.make_settings(tmp_path, [bad])):
            pass


async def test_label_budget_plans_the_audit_rate_and_stats_report_the_plan(storage, tmp_path):
    # 100 labels a day; the day so far: 160 reviewed + 200 auto-accepted (at the static rate).
    settings = S.make_settings(tmp_path, [external_panel(
        tmp_path, audit_rate=0.5, extra="label_budget_per_day: 180\n")], review_seed=3,
        audit_plan_ttl_s=0.0)
    world = World(seed=2)
    async with S.running_app(settings, storage) as (_app, client):
        await fuse(client, world, "good", 100)
        await fuse(client, world, "split", 60)
        await world.annotate(client)
        await tune(client)
        # the first auto-accepted verdict: no auto traffic yet in the day, the static rate
        [first] = await fuse(client, world, "good", 1)
        assert first["review"]["audit_rate"] == 0.5
        routed = await fuse(client, world, "good", 99)
        # (180 - 160 review) / auto-so-far: the planned rate falls as auto traffic grows
        rates = [v["review"]["audit_rate"] for v in routed]
        assert rates[0] == 1.0  # 20 labels left for 1 auto-accepted verdict: capped at rate 1
        assert rates[-1] == pytest.approx(20 / 99)
        stats = (await client.get("/v1/review/stats", params={"panel": "ext"}, headers=H)).json()
        plan = stats["audit_plan"]
        assert plan["source"] == "label_budget_per_day" and plan["label_budget_per_day"] == 180
        assert plan["review_per_day"] == 160 and plan["auto_per_day"] == 100
        assert plan["audit_rate"] == pytest.approx(0.2)
        assert plan["plan"]["binding"] == "budget"
        assert 0 < plan["expected_half_width"]["auto_accept"] < 1
        delay = plan["detection_delay_10_points"]
        assert delay["method"] == "path" and delay["labels"] > 0
        assert delay["verdicts"] == pytest.approx(delay["labels"] / 0.2)
        # stored stamps are never rewritten by a later plan
        again = (await client.get(f"/v1/verdicts/{first['id']}", headers=H)).json()
        assert again["review"]["audit_rate"] == 0.5


async def test_a_judge_whose_votes_change_is_flagged_without_labels(tmp_path):
    """Label-free judge drift: e1 starts voting "A" on everything; no label is ever given."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=1)
    rng = random.Random(4)

    def batch(n: int, e1_always_a: bool) -> dict:
        items = []
        for _ in range(n):
            truth = rng.choice("AB")
            e1 = "A" if e1_always_a else truth
            items.append({**PAIR, "votes": [{"judge": "e1", "choice": e1, "confidence": 0.9},
                                            {"judge": "e2", "choice": truth, "confidence": 0.9},
                                            {"judge": "e3", "choice": truth, "confidence": 0.9}]})
        return {"items": items}

    async with S.running_app(settings) as (_app, client):
        for _ in range(20):  # 640 verdicts: the reference period (512 votes) and some more
            r = await client.post("/v1/fuse/batch", json=batch(32, False), headers=H)
            assert r.status_code == 200 and r.json()["n_failed"] == 0, r.text
        calm = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert not any(j["votes"]["alarm"] for j in calm["judges"].values()), calm["judges"]
        flagged_after = None
        for k in range(1, 21):
            await client.post("/v1/fuse/batch", json=batch(32, True), headers=H)
            judges = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()["judges"]
            if judges["e1"]["votes"]["alarm"]:
                flagged_after = 32 * k
                break
        print(f"e1's share of 'A' 0.5 -> 1.0: flagged after {flagged_after} changed votes (no labels)")
        assert flagged_after is not None
        assert judges["e1"]["votes"]["share_a"]["direction"] == "up"
        assert not judges["e2"]["votes"]["alarm"] and not judges["e3"]["votes"]["alarm"]
        assert calm["state"] == "ok"  # no threshold, no labels: judge drift routes nothing
        metrics = (await client.get("/metrics", headers=S.admin())).text
        assert 'judgefuse_judge_drift_alarm{judge="e1",panel="ext",signal="votes",tenant="tenant-a"} 1.0' in metrics
        assert 'judgefuse_judge_drift_alarm{judge="e2",panel="ext",signal="votes",tenant="tenant-a"} 0.0' in metrics


def test_the_stored_monitor_is_the_monitor_label_for_label():
    """The blob a label writes (JSON round trip every time, as storage does) carries exactly
    the monitor that saw the same labels in memory: same bounds, same alarm label."""
    import json

    from judgefuse.calibration.sequential import PrecisionMonitor
    from judgefuse.service.monitoring.monitor_state import SERIES_POINTS, FoldedLabel, MonitorState, fold_labels

    rng = random.Random(5)
    state = MonitorState.new(0.85, 0.05, 3)
    direct = PrecisionMonitor(0.85, alpha=0.05)
    for i in range(600):
        correct = rng.random() < (0.92 if i < 300 else 0.6)
        fold_labels(state, [FoldedLabel(f"v{i}", correct, float(i), (("e1", 0.8, correct),))])
        state = MonitorState.from_json(json.loads(json.dumps(state.to_json(), allow_nan=False)))
        direct.update(correct)
        stored = PrecisionMonitor.from_state(state.precision)
        assert stored.bounds()[1:] == direct.bounds()[1:]
        assert stored.alarmed_at == direct.alarmed_at
    assert direct.alarmed_at is not None and direct.alarmed_at > 300
    assert state.alarm is not None and state.alarm.labels == direct.alarmed_at
    assert len(state.series) == SERIES_POINTS and state.series[-1][1] == 600
    assert state.judges["e1"]["kind"] == "brier_drift"
