"""The monitors' snapshot off the event loop (judgefuse.service.monitoring.snapshot), through the
app: every detector report behind /v1/monitor and /metrics is computed on another thread than
the loop's, /metrics shows what /v1/monitor shows after labels, and a report made from the
loop's copy of a vote-drift detector equals the live detector's own report."""

from __future__ import annotations

import random
import re
import threading

import pytest
from jf_test_support import app_support as S
from jf_test_support.monitor_support import EXT, TARGET, H, World, external_panel, fuse, tuned_and_good

from judgefuse.calibration.drift import BrierDrift, VoteDrift
from judgefuse.calibration.sequential import PrecisionMonitor
from judgefuse.service.monitoring.monitor import _BatchedVoteDrift
from judgefuse.service.monitoring.snapshot import compute_reports


def gauge(text: str, name: str, **labels: str) -> float:
    """The value of one sample of ``name`` with exactly ``labels`` in a Prometheus text body."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    match = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$", text, re.MULTILINE)
    assert match, f"no {name}{{{want}}} in /metrics"
    return float(match.group(1))


@pytest.fixture
def report_threads(monkeypatch):
    """The thread of every detector report made while the test runs (a spy that calls the
    real report: the values are the real ones)."""
    seen: list[tuple[str, int]] = []
    for cls in (PrecisionMonitor, BrierDrift, VoteDrift):
        real = cls.report

        def spy(self, _real=real, _name=cls.__name__):
            seen.append((_name, threading.get_ident()))
            return _real(self)

        monkeypatch.setattr(cls, "report", spy)
    return seen


async def test_scrapes_and_monitor_reads_report_on_a_worker_thread_with_the_same_values(
        tmp_path, report_threads):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], review_seed=11)
    world = World(seed=3)
    async with S.running_app(settings) as (_app, client):
        await tuned_and_good(client, world, 120)  # a threshold, audit labels, every judge's votes
        loop_thread = threading.get_ident()
        report_threads.clear()
        state = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        metrics = (await client.get("/metrics", headers=S.admin())).text
        kinds = {name for name, _ in report_threads}
        assert kinds == {"PrecisionMonitor", "BrierDrift", "VoteDrift"}, kinds
        assert all(thread != loop_thread for _, thread in report_threads), report_threads

        assert state["precision"]["labels"] > 0 and state["target"] == TARGET
        assert set(state["judges"]) == set(EXT)
        tenant = {"tenant": "tenant-a", "panel": "ext"}
        assert gauge(metrics, "judgefuse_monitor_labels", **tenant) == state["precision"]["labels"]
        assert gauge(metrics, "judgefuse_monitor_precision_lower", **tenant) == pytest.approx(
            state["precision"]["lower"])
        assert gauge(metrics, "judgefuse_monitor_precision_upper", **tenant) == pytest.approx(
            state["precision"]["upper"])
        assert gauge(metrics, "judgefuse_monitor_alarm", **tenant) == (state["state"] == "alarm")
        for judge in EXT:
            for signal in ("brier", "votes"):
                assert gauge(metrics, "judgefuse_judge_drift_alarm", judge=judge, signal=signal,
                             **tenant) == bool(state["judges"][judge][signal]["alarm"])

        # more labels: the blob's version moves, the next scrape reports the new count
        await fuse(client, world, "good", 40)
        await world.annotate(client)
        report_threads.clear()
        after = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        metrics = (await client.get("/metrics", headers=S.admin())).text
        assert after["precision"]["labels"] > state["precision"]["labels"]
        assert gauge(metrics, "judgefuse_monitor_labels", **tenant) == after["precision"]["labels"]
        assert gauge(metrics, "judgefuse_monitor_precision_upper", **tenant) == pytest.approx(
            after["precision"]["upper"])
        assert report_threads and all(thread != loop_thread for _, thread in report_threads)
        # nothing new since: /v1/monitor reuses the reports (exact: same blob, same votes)
        report_threads.clear()
        again = (await client.get("/v1/monitor", params={"panel": "ext"}, headers=H)).json()
        assert report_threads == [] and again == after


def test_a_report_from_the_loops_copy_equals_the_live_report():
    rng = random.Random(5)
    drift = _BatchedVoteDrift(0.05)
    for i in range(3_000):  # past the 500-vote reference, the share of "A" moving at 2,000
        drift.add("A" if rng.random() < (0.5 if i < 2_000 else 0.9) else "B", rng.random())
        if i % 97 == 0:
            drift.add(None, None)
    copy = drift.copy()
    _, votes = compute_reports(None, {"e1": copy})
    assert votes["e1"] == drift.report()
    assert copy.seen == 3_000 + 31 and votes["e1"]["votes"] == 3_000
    drift.add("A", 0.9)  # the copy is the state when it was taken
    assert compute_reports(None, {"e1": copy})[1]["e1"] == votes["e1"]
