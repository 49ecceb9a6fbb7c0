"""Reports over stored verdicts (judgefuse.service.estimates.reports) over real HTTP: one past the
report gate is a 429 with Retry-After naming ``max_inflight_reports``, while the computation
holding the gate runs in a worker thread and the loop keeps serving another tenant's /v1/fuse;
a repeated win-rate poll is answered from the cache until a verdict or a label of the panel
lands. The gate is held by a controlled blocker in the worker (``Reports.worker_hook``), never
by timing: nothing here depends on the machine's speed (issue 41)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support.live_gateway import live_gateway
from jf_test_support.panel_support import SPLIT, UNANIMOUS

PAIR = {"question": "Which is right?", "answer_a": "this one", "answer_b": "that one"}
A, B = S.auth("tenant-a"), S.auth("tenant-b")
WINRATE = "/v1/panels/ext/winrate"


def fuse(client: httpx.Client, headers: dict[str, str], vid: str, *, x_is_a: bool = True,
         ballot: list[dict] = UNANIMOUS) -> httpx.Response:
    meta = {"system_a": "X" if x_is_a else "Y", "system_b": "Y" if x_is_a else "X"}
    r = client.post("/v1/fuse", json={**PAIR, "panel": "ext", "id": vid, "votes": ballot, "metadata": meta},
                    headers=headers)
    assert r.status_code == 200, r.text
    return r


def seed(client: httpx.Client, n: int) -> None:
    for i in range(n):
        fuse(client, A, f"v{i}", x_is_a=bool(i % 2), ballot=UNANIMOUS if i % 3 else SPLIT)


def test_a_report_past_its_gate_is_a_429_while_the_one_computing_runs_off_the_loop(tmp_path: Path) -> None:
    with live_gateway(tmp_path, max_inflight_reports=1, report_wait_s=0.0) as gw, \
            httpx.Client(base_url=gw.url, timeout=20) as client:
        seed(client, 12)
        reports = gw.gateway.calibration.reports
        loop_thread = gw.run(_thread_ident())
        entered, release = threading.Event(), threading.Event()
        workers: list[int] = []

        def blocker(report: str) -> None:
            workers.append(threading.get_ident())
            if report == "winrate" and not entered.is_set():
                entered.set()
                release.wait(30)  # holds the gate's one place, in the worker thread

        reports.worker_hook = blocker
        held: dict[str, httpx.Response] = {}

        def first() -> None:
            with httpx.Client(base_url=gw.url, timeout=30) as own:
                held["r"] = own.get(WINRATE, params={"x": "X", "y": "Y"}, headers=A)

        poller = threading.Thread(target=first)
        poller.start()
        try:
            assert entered.wait(20), "the win rate never reached its worker"
            # another report needing a computation: refused at once, naming the limit
            refused = client.get(WINRATE, params={"x": "X", "y": "Y", "field": "model"}, headers=A)
            structure = client.get("/v1/calibration", params={"panel": "ext", "disagreements": 0}, headers=B)
            listing = client.get("/console/verdicts", params={"panel": "ext"}, headers=A)
            plan = client.get("/v1/panels/ext/plan", headers=A)
            # the loop is free while the worker is held: another tenant is judged meanwhile
            other = fuse(client, B, "b-0")
        finally:
            release.set()
            poller.join(30)
        reports.worker_hook = None
        for response in (refused, structure, listing, plan):
            assert response.status_code == 429, response.text
            assert int(response.headers["Retry-After"]) >= 1
            body = response.json()
            assert body["limit"] == "max_inflight_reports" and body["max_inflight"] == 1, body
            assert body["retry_after_s"] == int(response.headers["Retry-After"])
        assert other.json()["choice"] == "A"
        assert held["r"].status_code == 200, held["r"].text
        assert held["r"].json()["n_verdicts"] == 12
        assert workers and loop_thread not in workers  # every step of the computation off the loop
        assert reports.counts[("winrate", "refused")] == 1
        # the place is back: the refused report is computed now
        again = client.get(WINRATE, params={"x": "X", "y": "Y", "field": "model"}, headers=A)
        assert again.status_code == 200 and again.json()["n_verdicts"] == 0
        planned = client.get("/v1/panels/ext/plan", headers=A)  # 12 verdicts of seconds: said so
        assert planned.status_code == 200 and planned.json()["plan"] is None, planned.text
        assert planned.json()["n_verdicts"] == 12 and "not enough traffic yet" in planned.json()["not_enough_traffic"]
        assert reports.counts[("plan", "refused")] == 1 and reports.counts[("plan", "computed")] == 1
        metrics = client.get("/metrics", headers=A).text
        assert 'judgefuse_admission_rejected_total{limit="max_inflight_reports",tenant="tenant-a"} 3.0' in metrics


def test_a_repeated_poll_is_served_from_the_cache_until_a_verdict_or_label_lands(tmp_path: Path) -> None:
    with live_gateway(tmp_path) as gw, httpx.Client(base_url=gw.url, timeout=20) as client:
        seed(client, 10)
        counts = gw.gateway.calibration.reports.counts

        def poll(**params: object) -> dict:
            r = client.get(WINRATE, params={"x": "X", "y": "Y", **params}, headers=A)
            assert r.status_code == 200, r.text
            return r.json()

        first = poll()
        assert counts[("winrate", "computed")] == 1 and counts[("winrate", "cached")] == 0
        assert poll() == first
        swapped = poll(x="Y", y="X", level=0.9)  # any pair and level from the same rows
        assert counts[("winrate", "computed")] == 1 and counts[("winrate", "cached")] == 2
        assert swapped["judge_only"]["estimate"] == pytest.approx(1 - first["judge_only"]["estimate"])
        assert swapped["n_verdicts"] == first["n_verdicts"] == 10
        # another tenant's verdict on the same panel is not this tenant's data
        fuse(client, B, "b-0")
        poll()
        assert counts[("winrate", "computed")] == 1
        # a new verdict of the panel: read again, and counted
        fuse(client, A, "v-new")
        assert poll()["n_verdicts"] == 11
        assert counts[("winrate", "computed")] == 2
        assert poll()["n_verdicts"] == 11 and counts[("winrate", "computed")] == 2
        # a label: read again
        r = client.post("/v1/feedback", json={"verdict_id": "v-new", "label": "B"}, headers=A)
        assert r.status_code == 200, r.text
        labelled = poll()
        assert counts[("winrate", "computed")] == 3
        assert labelled["n_labels"] == first["n_labels"] + 1
        # the window is a key of its own, and a poll of it reused too
        assert poll(window_hours=1)["n_verdicts"] == 11
        poll(window_hours=1)
        assert counts[("winrate", "computed")] == 4
        metrics = client.get("/metrics", headers=A).text
        assert ('judgefuse_report_reads_total{outcome="cached",report="winrate",tenant="tenant-a"} '
                f'{float(counts[("winrate", "cached")])}') in metrics


async def _thread_ident() -> int:
    return threading.get_ident()


def test_a_cached_poll_reads_no_storage_and_sees_another_replicas_verdict_once_the_check_is_due(
        tmp_path: Path) -> None:
    """Within ``shared_check_s`` (a controlled clock here) a cached poll reads no counter, hands
    nothing to a worker and re-encodes nothing; this process's verdict is seen at once; a
    verdict stored by another replica (another Storage on the same file) once the check is due."""
    from judgefuse.service.ledger import ALL_METHODS, traffic_prefix
    from judgefuse.service.storage.sqlite import SQLiteStorage

    with live_gateway(tmp_path, report_polls_per_s=0) as gw, httpx.Client(base_url=gw.url, timeout=20) as client:
        seed(client, 6)
        calibration = gw.gateway.calibration
        cache, counts = calibration.win_rates, calibration.reports.counts
        clock = [0.0]
        cache.monotonic = lambda: clock[0]
        steps: list[str] = []
        calibration.reports.worker_hook = steps.append

        def poll(**params: object) -> httpx.Response:
            r = client.get(WINRATE, params={"x": "X", "y": "Y", **params}, headers=A)
            assert r.status_code == 200, r.text
            return r

        first = poll()
        reads, handed = cache.version_reads, len(steps)
        assert handed >= 2  # the scan's folds and the answer, in a worker
        for _ in range(5):
            assert poll().content == first.content
        assert cache.version_reads == reads and len(steps) == handed  # no read, no worker
        poll(level=0.9)  # another level: computed once from the kept rows, in a worker
        assert len(steps) == handed + 1 and counts[("winrate", "computed")] == 1
        poll(level=0.9)
        assert len(steps) == handed + 1
        # this process's verdict: seen on the next poll, no counter read needed
        fuse(client, A, "v-local")
        assert poll().json()["n_verdicts"] == 7 and cache.version_reads == reads
        assert counts[("winrate", "computed")] == 2

        # another replica stores a verdict (and moves the panel's shared traffic counters)
        async def other_replica() -> None:
            async with SQLiteStorage(tmp_path / "gateway.sqlite3") as other:
                record = await other.get_verdict("tenant-a", "v0")
                assert record is not None
                key = (await other.list_accumulators("tenant-a", traffic_prefix("ext", ALL_METHODS)))[0]
                field = next(iter(await other.read_accumulator("tenant-a", key)))
                await other.save_verdict("tenant-a", record.model_copy(update={"id": "v-remote"}),
                                         {key: {field: 1}})

        gw.run(other_replica())
        assert poll().json()["n_verdicts"] == 7  # not due yet: the kept answer
        assert cache.version_reads == reads
        clock[0] += cache.shared_check_s
        assert poll().json()["n_verdicts"] == 8
        assert cache.version_reads == reads + 1 and counts[("winrate", "computed")] == 3
        calibration.reports.worker_hook = None


def test_a_tenants_polls_past_its_pace_are_a_429_naming_report_polls_per_s(tmp_path: Path) -> None:
    with live_gateway(tmp_path, report_polls_per_s=2, report_wait_s=0.0) as gw, \
            httpx.Client(base_url=gw.url, timeout=20) as client:
        seed(client, 4)
        reports = gw.gateway.calibration.reports
        clock = [100.0]
        reports.monotonic = lambda: clock[0]
        answers = [client.get(WINRATE, params={"x": "X", "y": "Y"}, headers=A) for _ in range(3)]
        assert [r.status_code for r in answers] == [200, 200, 429]  # a burst of a second's worth
        body = answers[2].json()
        assert body["limit"] == "report_polls_per_s" and "max_inflight" not in body
        assert answers[2].headers["Retry-After"] == "1" == str(body["retry_after_s"])
        # another tenant has its own pace
        assert client.get(WINRATE, params={"x": "X", "y": "Y"}, headers=B).status_code == 200
        clock[0] += 0.5  # one turn later
        assert client.get(WINRATE, params={"x": "X", "y": "Y"}, headers=A).status_code == 200
        assert client.get(WINRATE, params={"x": "X", "y": "Y"}, headers=A).status_code == 429
        assert reports.counts[("winrate", "refused")] == 2
        metrics = client.get("/metrics", headers=A).text
        assert 'judgefuse_admission_rejected_total{limit="report_polls_per_s",tenant="tenant-a"} 2.0' in metrics
