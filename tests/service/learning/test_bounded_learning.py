"""Bounded learning (docs/design.md, 'Bounded learning'): one tenant cannot stall the gateway
through its refits. Posted signals are bounded per vote at the boundary (a 422) and per judge
and in all at the refit (ignored for learning, said so); a refit runs in a worker process with
a time and a memory budget and fails cleanly over either; identical label sets are refitted
and promoted once, also under 12 concurrent manual refits on two replicas."""

from __future__ import annotations

import asyncio
import os

import pytest
from jf_test_support import app_support as S
from jf_test_support import refit_jobs
from jf_test_support.panel_support import EXT, PAIR, H, external_panel

from judgefuse.fusion import StackedFusion
from judgefuse.fusion.auto import AutoFusion
from judgefuse.fusion.capabilities import restore_method
from judgefuse.judges.types import JudgeVote
from judgefuse.service.learning.refit_worker import WORKER_NICE, RefitWorkerFailed, RefitWorkers, WorkerBudget
from judgefuse.service.learning.signal_caps import SignalCaps, TooManyFeatures, cap_signals
from judgefuse.service.learning.worker_priority import NICE_VARIABLE, InvalidWorkerNice, worker_nice


def _truth(i: int) -> str:
    return "A" if (i * 7) % 3 else "B"


def skilled_votes(i: int, *, fresh_signals: int = 0, stable: bool = True) -> list[dict]:
    """e1 right 90% of the time; e2 and e3 wrong together on 40% of items (so stacking beats
    majority voting clearly). ``fresh_signals`` new signal names per vote (never seen again)."""
    truth = _truth(i)
    wrong = "B" if truth == "A" else "A"
    out = []
    for judge in EXT:
        if judge == "e1":
            choice, confidence = (wrong, 0.6) if i % 10 == 3 else (truth, 0.9)
        else:
            choice, confidence = (wrong, 0.9) if i % 5 in (0, 1) else (truth, 0.7)
        signals = {f"{judge}-fresh-{i}-{k}": float(k + 1) for k in range(fresh_signals)}
        if stable:
            signals["margin"] = confidence if choice == "A" else -confidence
        out.append({"judge": judge, "choice": choice, "confidence": confidence, "signals": signals})
    return out


async def post_labelled(client, start: int, stop: int, **kwargs) -> None:
    for first in range(start, stop, 50):
        items = [{**PAIR, "id": f"it-{i}", "label": _truth(i), "votes": skilled_votes(i, **kwargs)}
                 for i in range(first, min(first + 50, stop))]
        r = await client.post("/v1/fuse/batch", json={"items": items}, headers=H)
        assert r.status_code == 200 and r.json()["n_failed"] == 0, r.text


# ------------------------------------------------------------------ the caps, as a rule
def _vote(judge: str, *names: str) -> JudgeVote:
    return JudgeVote(judge=judge, mode="sc", choice="A", confidence=0.8,
                     signals={name: 1.0 for name in names})


def test_the_caps_keep_the_most_common_names_per_judge_then_fit_the_feature_cap():
    batches = [[_vote("a", "margin", "gap", f"fresh{i}"), _vote("b", "margin", f"b{i}")]
               for i in range(20)]
    batches.append([_vote("a", "gap", "rare")])
    capped = cap_signals(batches, SignalCaps(per_judge=2, max_features=100))
    assert capped.kept == {"a": ["gap", "margin"], "b": ["b0", "margin"]}  # ties by name
    assert capped.ignored == {"a": 21, "b": 19}
    assert "40 signal names ignored for learning" in capped.note()
    assert all(set(v.signals) <= set(capped.kept[v.judge]) for b in capped.batches for v in b)
    assert batches[0][0].signals.keys() == {"margin", "gap", "fresh0"}  # the input is not changed
    # 2 judges x 5 features (log-odds, missing, invalid, tie, direction) + 1 signal: the most
    # common one across judges survives
    tight = cap_signals(batches, SignalCaps(per_judge=2, max_features=11))
    assert tight.n_features == 11 and tight.kept == {"a": ["gap"]}
    with pytest.raises(TooManyFeatures, match="2 judges need 10 features"):
        cap_signals(batches, SignalCaps(per_judge=2, max_features=9))
    untouched = [[_vote("a", "margin")]]
    assert cap_signals(untouched, SignalCaps(4, 100)).batches[0][0] is untouched[0][0]


# ------------------------------------------------------------------ at the boundary
@pytest.mark.parametrize(("signals", "problem"), [
    ({f"s{k}": 1.0 for k in range(5)}, "at most 4 signals"),
    ({"x" * 65: 1.0}, "at most 64 characters"),
])
async def test_a_vote_over_the_signal_limits_is_422_naming_its_signals(tmp_path, signals, problem):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], max_signals_per_vote=4)
    async with S.running_app(settings) as (_app, client):
        votes = skilled_votes(0, stable=False)
        votes[1]["signals"] = signals
        r = await client.post("/v1/fuse", json={**PAIR, "votes": votes}, headers=H)
        assert r.status_code == 422, r.text
        assert r.json()["fields"][0]["field"] == "body.votes[1].signals"
        assert problem in r.json()["fields"][0]["problem"]
        votes[1]["signals"] = dict(list(signals.items())[:1]) if len(signals) > 1 else {"x" * 64: 1.0}
        assert (await client.post("/v1/fuse", json={**PAIR, "votes": votes}, headers=H)).status_code == 200


# ------------------------------------------------------------------ a refit on fresh names
async def test_a_refit_on_fresh_signal_names_learns_from_the_capped_set_and_says_so(tmp_path):
    """The reproduction: every labelled vote carries names never seen again (before: one
    feature each, 40 x 3 x 6 = 720 features and a 720 x 720 Hessian per fold)."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=40,
                               max_signals_per_judge=3, refit_max_features=20)
    async with S.running_app(settings) as (app, client):
        await post_labelled(client, 0, 120, fresh_signals=6)
        outcome = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert "signal names ignored for learning" in outcome["reason"], outcome
        assert outcome["status"] == "promoted", outcome  # stacking beats majority clearly here
        model = (await client.get("/v1/fusion/models", params={"panel": "ext"}, headers=H)).json()
        # the default refit (auto) chose a stacking candidate, whose features are read through it
        served = restore_method(model["active_method"], model["history"][-1]["params"])
        assert isinstance(served, AutoFusion) and isinstance(served.chosen_base, StackedFusion), served
        names = served.chosen_base.feature_names
        assert len(names) <= 20 and sum(":signal:" in n for n in names) == 20 - 15, names
        assert {"e1:signal:margin", "e2:signal:margin", "e3:signal:margin"} <= set(names)
        assert (await client.get("/healthz")).status_code == 200


# ------------------------------------------------------------------ the worker process
async def test_a_job_runs_in_another_process_while_the_loop_keeps_serving():
    workers = RefitWorkers(WorkerBudget(time_s=60, memory_mb=256))
    assert await workers.run(refit_jobs.worker_pid) != os.getpid()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        assert (await workers.run(refit_jobs.busy, 2.0)).startswith("spun")
    finally:
        ticker.cancel()
    # the loop kept ticking while the worker held its CPU for 2 s (~200 ticks of 10 ms on an
    # idle machine; a handful is enough to show the loop was never held for the whole job)
    assert ticks >= 5, ticks


@pytest.mark.parametrize(("job", "args", "budget", "reason"), [
    (refit_jobs.busy, (30.0,), WorkerBudget(time_s=1.0, memory_mb=256), "time budget of 1 s (refit_timeout_s)"),
    (refit_jobs.allocate, (2048,), WorkerBudget(time_s=60, memory_mb=128), "memory budget of 128 MB (refit_memory_mb)"),
    (refit_jobs.fail, (), WorkerBudget(time_s=60, memory_mb=256), "ValueError: a bad job"),
])
async def test_a_job_over_a_budget_or_failing_fails_cleanly_with_the_reason(job, args, budget, reason):
    workers = RefitWorkers(budget)
    with pytest.raises(RefitWorkerFailed) as failed:
        await workers.run(job, *args)
    assert reason in failed.value.reason
    # the next job (with room to start on a busy machine) runs as usual
    assert await RefitWorkers(WorkerBudget(time_s=120, memory_mb=256)).run(refit_jobs.worker_pid) > 0


async def test_a_refit_over_its_time_budget_fails_and_is_not_remembered(tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=40,
                               refit_timeout_s=0.01)
    async with S.running_app(settings) as (app, client):
        await post_labelled(client, 0, 60)
        for _ in range(2):  # a failed refit frees its label set: the second one runs too
            outcome = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
            assert outcome["status"] == "failed" and "time budget" in outcome["reason"], outcome
        assert (await client.get("/healthz")).status_code == 200
        model = (await client.get("/v1/fusion/models", params={"panel": "ext"}, headers=H)).json()
        assert model["history"] == []


# ------------------------------------------------------------------ one promotion per label set
async def test_twelve_concurrent_manual_refits_on_two_replicas_promote_once(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=40)
    async with S.running_app(settings, storage) as (_a, a), S.running_app(settings, storage) as (_b, b):
        await post_labelled(a, 0, 60)
        outcomes = await asyncio.gather(*(
            client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)
            for client in (a, b) * 6))
        outcomes = [r.json() for r in outcomes]
        statuses = sorted(o["status"] for o in outcomes)
        assert set(statuses) <= {"promoted", "skipped"} and "promoted" in statuses, outcomes
        assert {o["version"] for o in outcomes if o["status"] == "promoted"} == {1}
        history = await storage.model_history("tenant-a", "ext")
        assert [m.version for m in history] == [1]
        again = (await b.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert again["status"] == "skipped" and "refitted already" in again["reason"], again
        assert again["version"] == 1
        await post_labelled(b, 60, 61)  # a new label: a new label set, refitted
        fresh = (await a.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert fresh["status"] in ("promoted", "kept") and fresh["n_labels"] == 61, fresh


# ------------------------------------------------------------------ the worker reads the labels
# Issue 26: a refit of 2,000 labels once parsed and pickled its records in the gateway (~1 s of
# CPU beside the event loop) and ran on the gateway's pinned core. The worker now reads them
# from the store itself; the gateway learns the label set's size and digest and stores the
# fitted parameters; the worker leaves the CPU the gateway is pinned to.
async def test_the_gateway_never_reads_the_labelled_records_of_a_refit(storage, tmp_path):
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=40)
    async with S.running_app(settings, storage) as (_app, client):
        await post_labelled(client, 0, 60)
        reads: list[tuple[object, ...]] = []
        read = storage.iter_labelled

        async def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            reads.append(args)
            return await read(*args, **kwargs)

        storage.iter_labelled = counted  # type: ignore[method-assign]
        outcome = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        # the worker read all 60 labels (its own connection to the same store) and fitted them
        assert outcome["status"] == "promoted" and outcome["n_labels"] == 60, outcome
        assert outcome["metrics"]["n_labels"] == 60.0, outcome
        history = await storage.model_history("tenant-a", "ext")
        assert [m.version for m in history] == [1] and history[0].params, history
        # the same label set again: the worker names it, the gateway answers "refitted already"
        again = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert again["status"] == "skipped" and "refitted already" in again["reason"], again
        assert again["n_labels"] == 60, again
        assert reads == [], f"the gateway read the labelled records itself: {reads}"


async def test_too_few_labels_are_answered_from_a_count_and_nothing_is_fitted(tmp_path):
    """The gateway counts the labels (``count_labelled``) before it starts a worker: a refit asked
    for early answers at once (the fuzz test posts 100 of them; each once waited on a worker)."""
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)], min_labels_for_refit=40)
    async with S.running_app(settings) as (_app, client):
        await post_labelled(client, 0, 25)
        outcome = (await client.post("/v1/fusion/refit", json={"panel": "ext"}, headers=H)).json()
        assert outcome["status"] == "skipped" and outcome["n_labels"] == 25, outcome
        assert "at least 40 are needed" in outcome["reason"], outcome


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two CPUs this process may use")
async def test_the_worker_leaves_the_cpu_the_gateway_is_pinned_to_and_stays_nice():
    allowed = os.sched_getaffinity(0)
    pinned = min(allowed)
    os.sched_setaffinity(0, {pinned})  # as the benchmark pins the gateway (taskset)
    try:
        cpus, nice = await RefitWorkers(WorkerBudget(time_s=120, memory_mb=256)).run(refit_jobs.cpus_and_nice)
    finally:
        os.sched_setaffinity(0, allowed)
    assert cpus and pinned not in cpus and set(cpus) <= allowed, (pinned, cpus)
    # the suite's level (tests/conftest.py), below the tests' own 0: the judges and clients beside it come first
    assert nice == worker_nice() > os.getpriority(os.PRIO_PROCESS, 0), nice
    # not pinned: the worker may use every CPU
    cpus, _nice = await RefitWorkers(WorkerBudget(time_s=120, memory_mb=256)).run(refit_jobs.cpus_and_nice)
    assert set(cpus) == allowed, cpus


def _forkservers() -> list[int]:
    """This process's children that are a multiprocessing forkserver (from /proc)."""
    children: list[int] = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children", encoding="ascii") as listed:
            children += [int(pid) for pid in listed.read().split()]
    found = []
    for pid in children:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                if b"multiprocessing.forkserver" in cmdline.read():
                    found.append(pid)
        except OSError:
            continue
    return found


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="needs Linux /proc")
async def test_the_forkserver_itself_runs_at_the_workers_nice():
    """The forkserver imports the fitting code for seconds: at the gateway's priority on the
    gateway's core that once took half of it while a refit started; it steps back first."""
    await RefitWorkers(WorkerBudget(time_s=120, memory_mb=256)).run(refit_jobs.cpus_and_nice)
    servers = _forkservers()
    assert servers, "no forkserver child found"
    assert {os.getpriority(os.PRIO_PROCESS, pid) for pid in servers} == {worker_nice()} != {0}
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0  # the gateway's own priority is untouched


def test_the_workers_nice_is_the_lowest_unless_the_environment_says_otherwise():
    assert worker_nice({}) == WORKER_NICE == 19  # the product's default
    assert worker_nice({NICE_VARIABLE: " "}) == 19
    assert worker_nice({NICE_VARIABLE: "0"}) == 0 and worker_nice({NICE_VARIABLE: " 7 "}) == 7
    for bad in ("20", "-1", "low", "1.5", "\uff11"):
        with pytest.raises(InvalidWorkerNice, match=f"{NICE_VARIABLE}=.*whole number from 0 to 19"):
            worker_nice({NICE_VARIABLE: bad})


async def test_a_bad_nice_level_stops_the_gateway_at_start(tmp_path, monkeypatch):
    monkeypatch.setenv(NICE_VARIABLE, "twenty")
    settings = S.make_settings(tmp_path, [external_panel(tmp_path)])
    with pytest.raises(InvalidWorkerNice, match="'twenty'"):
        async with S.running_app(settings):
            pass
