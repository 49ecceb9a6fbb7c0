"""The review loop end to end over HTTP: recorded judgments replayed as live traffic.

Why: the labels a gateway gets back are chosen by its own routing (docs/design.md, 'The review
loop'); this checks, on real recorded judgments, that what the *service* reports about all of
its traffic (``GET /v1/calibration``'s ``population`` block) matches the truth of the stream,
where the labelled-sample numbers do not, and that what it auto-accepts after tuning on its
own queue meets the target precision.

Setup: a real gateway (uvicorn on loopback, SQLite in a temporary folder) with a panel of
``external: true`` judges; the stream is posted through ``POST /v1/fuse/batch`` with the
recorded votes; a simulated annotator works the queue through ``GET /v1/review/next`` +
``POST /v1/feedback`` with the true labels (every queued item: review and audit). Stream:

1. the first ``warmup`` items with no threshold: all routed to review, all labelled;
2. ``POST /v1/thresholds/tune`` (target precision, delta 0.1) on those labels;
3. the rest of the stream: auto-accepted above the threshold (``audit_rate`` of those audited,
   i.e. queued and labelled too), review below.

Trust-or-Escalate's 500 items are resampled to a stream of 1,000 (300 warm-up): with 150
labels no threshold can be shown to meet 0.85 at delta 0.1, and nothing would be auto-accepted.

Printed per data set, over the whole stream: the truth (every verdict against its true label)
vs the service's population estimate with its 95% interval vs the naive labelled-sample value,
for accuracy, ECE, Brier, TH-Score and auto-accept precision; the realised precision of what
was auto-accepted vs the target. Then the in-process resampled-stream simulation
(``benchmarks/bench_review_sim.py``'s ``simulate``) when present, on the same pools.

Data (``../shared/data`` or ``JUDGEFUSE_SHARED_DATA``): Trust-or-Escalate gpt-4-turbo (one
judge, p_a = probs[0] / (probs[0] + probs[1]), label = preferences.human, fusion
``mean_probability``) and the JudgeBench GPT-4o split (10 recorded judges through
``judgefuse.evaluation.loaders``, fusion ``majority``). A judge's tie vote (JudgeBench's ``A=B``) is
posted as ``POST /v1/fuse`` takes one: ``p_a`` 0.5 and no choice (``"choice": null`` would abstain).

Run from the repository root (< 3 minutes)::

    PYTHONPATH=. python benchmarks/bench_review_loop.py [sim_streams]
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import random
import socket
import sys
import tempfile
import textwrap
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import httpx

from judgefuse.calibration import summarize
from judgefuse.judges.types import JudgeVote, Letter
from judgefuse.service.app import create_app
from judgefuse.service.settings import Settings

REPO = Path(__file__).resolve().parents[1]
METRICS = ("accuracy", "ece", "brier", "th_score")


def data_dir() -> Path:
    return Path(os.environ.get("JUDGEFUSE_SHARED_DATA", REPO.parent / "shared" / "data"))


@dataclass
class Item:
    id: str
    question: str
    answer_a: str
    answer_b: str
    label: Letter
    votes: list[dict[str, Any]]


@dataclass
class Scenario:
    name: str
    judges: list[tuple[str, str]]  # (name, mode)
    fusion: str
    items: list[Item]
    target: float
    warmup: int
    audit_rate: float = 0.1
    stream_len: int | None = None
    """Resample the recorded items (with replacement, fresh ids) to this length; None: each once."""


def _posted(vote: JudgeVote) -> dict[str, Any]:
    if vote.tie:  # POST /v1/fuse's tie vote: p_a 0.5 and no choice (``"choice": null`` abstains)
        return {"judge": vote.judge, "p_a": 0.5, "mode": vote.mode}
    out: dict[str, Any] = {"judge": vote.judge, "choice": vote.choice, "confidence": vote.confidence,
                           "mode": vote.mode}
    if vote.p_a is not None:
        out["p_a"] = vote.p_a
    if vote.signals:
        out["signals"] = vote.signals
    return out


def toe_scenario(root: Path) -> Scenario:
    items = []
    path = root / "trust_or_escalate" / "gpt-4-turbo.calibration.jsonl"
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            rec = json.loads(line)
            p0, p1 = rec["probs"]
            p_a = p0 / (p0 + p1)
            vote = JudgeVote.from_p_a("gpt-4-turbo", "logprob", p_a)
            items.append(Item(f"toe-{i}", rec["instruction"], rec["outputs"][0], rec["outputs"][1],
                              "A" if rec["preferences"]["human"] == 1 else "B", [_posted(vote)]))
    return Scenario("Trust-or-Escalate gpt-4-turbo (1 judge, mean_probability)",
                    [("gpt-4-turbo", "logprob")], "mean_probability", items, target=0.85, warmup=300,
                    stream_len=1000)


def judgebench_scenario(root: Path) -> Scenario:
    from judgefuse.evaluation.loaders import load

    judged = load([root / "judgebench"])
    names = sorted({v.judge for it in judged for v in it.votes})
    items = []
    for it in judged:
        assert it.item.label is not None
        items.append(Item(f"jb-{it.item.id}", it.item.question, it.item.answer_a, it.item.answer_b,
                          it.item.label, [_posted(v) for v in it.votes]))
    return Scenario(f"JudgeBench GPT-4o ({len(names)} judges, majority)",
                    [(n, "sc") for n in names], "majority", items, target=0.8, warmup=120)


def panel_file(folder: Path, scenario: Scenario, name: str) -> Path:
    judges = "".join(f"  - {{name: {json.dumps(j)}, external: true, mode: {m}}}\n" for j, m in scenario.judges)
    text = textwrap.dedent(f"""\
        name: {name}
        fusion: {scenario.fusion}
        quorum: 1
        audit_rate: {scenario.audit_rate}
        judges:
        """) + judges
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@contextlib.asynccontextmanager
async def serve(settings: Settings) -> AsyncIterator[str]:
    """The app under uvicorn on a free loopback port, in this event loop."""
    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(create_app(settings), host="127.0.0.1", port=port,
                                           log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def post_stream(client: httpx.AsyncClient, panel: str, items: Sequence[Item]) -> list[dict[str, Any]]:
    out = []
    for start in range(0, len(items), 64):
        chunk = items[start:start + 64]
        body = {"items": [{"id": it.id, "question": it.question, "answer_a": it.answer_a,
                           "answer_b": it.answer_b, "panel": panel, "votes": it.votes} for it in chunk]}
        r = await client.post("/v1/fuse/batch", json=body)
        r.raise_for_status()
        for result in r.json()["results"]:
            if result["status"] != 200:
                raise RuntimeError(f"/v1/fuse/batch item failed: {result['error']}")
            out.append(result["verdict"])
    return out


async def work_queue(client: httpx.AsyncClient, panel: str, labels: dict[str, Letter]) -> int:
    """The simulated annotator: lease, label with the truth, until the queue is empty."""
    done = 0
    while True:
        r = await client.get("/v1/review/next", params={"panel": panel, "n": 50, "annotator": "sim"})
        r.raise_for_status()
        items = r.json()["items"]
        if not items:
            return done
        for item in items:
            fb = await client.post("/v1/feedback", json={"verdict_id": item["verdict_id"],
                                                         "label": labels[item["verdict_id"]]})
            fb.raise_for_status()
            done += 1


def _fmt(value: float | None, digits: int = 3) -> str:
    return "   -  " if value is None else f"{value:.{digits}f}"


async def run_scenario(scenario: Scenario, folder: Path, seed: int = 0) -> dict[str, Any]:
    panel = "replay"
    rng = random.Random(seed)
    items = list(scenario.items)
    if scenario.stream_len is not None:
        items = [replace(it, id=f"{it.id}@{i}") for i, it in
                 enumerate(rng.choices(items, k=scenario.stream_len))]
    else:
        rng.shuffle(items)
    labels = {it.id: it.label for it in items}
    settings = Settings(
        storage_url=f"sqlite:///{folder / 'review-loop.sqlite3'}", sqlite_synchronous="NORMAL",
        panels=[panel_file(folder, scenario, panel)], auth_disabled=True, refit_every_labels=0,
        state_ttl_s=0.0, review_seed=seed, max_batch_items=64,
    )
    started = time.perf_counter()
    async with serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        verdicts = await post_stream(client, panel, items[:scenario.warmup])
        labelled = await work_queue(client, panel, labels)
        tune = (await client.post("/v1/thresholds/tune", json={
            "panel": panel, "target_precision": scenario.target, "delta": 0.1, "min_count": 30})).json()
        verdicts += await post_stream(client, panel, items[scenario.warmup:])
        labelled += await work_queue(client, panel, labels)
        cal = (await client.get("/v1/calibration", params={"panel": panel, "window_hours": 0})).json()
        query_ms = []
        for _ in range(15):
            t0 = time.perf_counter()
            (await client.get("/v1/calibration", params={"panel": panel})).raise_for_status()
            query_ms.append((time.perf_counter() - t0) * 1e3)
        stats = (await client.get("/v1/review/stats", params={"panel": panel})).json()
    elapsed = time.perf_counter() - started
    entry = next(k for k in cal["keys"] if k["key"] == f"method:{scenario.fusion}:fused")
    conf = [v["confidence"] for v in verdicts]
    correct = [v["choice"] is not None and v["choice"] == labels[v["id"]] for v in verdicts]
    truth = summarize(conf, correct)
    auto = [ok for v, ok in zip(verdicts, correct, strict=True) if v["route"] == "auto_accept"]
    return {"scenario": scenario, "truth": truth, "population": entry["population"],
            "naive": entry["all_time"], "tune": tune, "auto": auto, "labelled": labelled,
            "n": len(verdicts), "stats": stats, "elapsed": elapsed,
            "query_ms": sorted(query_ms)[len(query_ms) // 2],
            "n_keys": sum(1 for k in cal["keys"] if k["population"] is not None)}


def report(result: dict[str, Any]) -> None:
    scenario: Scenario = result["scenario"]
    pop, naive, truth = result["population"], result["naive"], result["truth"]
    tune = result["tune"]
    auto = result["auto"]
    print(f"\n== {scenario.name}: {result['n']} verdicts over HTTP in {result['elapsed']:.1f} s; "
          f"{result['labelled']} labelled by the simulated annotator ({pop['labelled']} per stratum); "
          f"audit_rate {scenario.audit_rate}")
    print(f"tuned on the first {scenario.warmup} (all reviewed): threshold "
          f"{_fmt(tune.get('threshold'), 4)} for target precision {scenario.target} "
          f"(delta 0.1; {tune.get('reason', '')})")
    print(f"{'metric':<22}{'truth':>8}{'population [95% interval]':>34}{'labelled sample':>17}")
    for name in METRICS:
        iv = pop[name] or {}
        interval = (f"{_fmt(iv.get('estimate'))} [{_fmt(iv.get('lower'))}, {_fmt(iv.get('upper'))}]"
                    if iv else "-")
        covered = (iv.get("lower") is not None and iv["lower"] - 1e-9 <= truth[name] <= iv["upper"] + 1e-9)
        print(f"{name:<22}{truth[name]:>8.3f}{interval:>34}{naive[name]:>17.3f}"
              f"  {'covered' if covered else 'NOT covered'}")
    realised = sum(auto) / len(auto) if auto else None
    iv = pop["auto_accept_precision"] or {}
    print(f"{'auto-accept precision':<22}{_fmt(realised):>8}"
          f"{(_fmt(iv.get('estimate')) + ' [' + _fmt(iv.get('lower')) + ', ' + _fmt(iv.get('upper')) + ']') if iv else '-':>34}"
          f"{'':>17}  target {scenario.target}: {'met' if realised is None or realised >= scenario.target else 'MISSED'}"
          f" ({len(auto)} auto-accepted, {sum(not ok for ok in auto)} wrong)")
    print(f"GET /v1/calibration (all time + 24 h window, {result['n_keys']} keys with a population "
          f"block): {result['query_ms']:.1f} ms median over HTTP")


def run_simulation(scenarios: Sequence[Scenario], streams: int) -> None:
    path = REPO / "benchmarks" / "bench_review_sim.py"
    if not path.exists():
        print("\n(benchmarks/bench_review_sim.py not present: in-process simulation skipped)")
        return
    spec = importlib.util.spec_from_file_location("bench_review_sim", path)
    assert spec is not None and spec.loader is not None
    sim = importlib.util.module_from_spec(spec)
    sys.modules["bench_review_sim"] = sim
    spec.loader.exec_module(sim)
    import numpy as np

    from judgefuse.fusion import get_method

    for scenario in scenarios:
        method = get_method(scenario.fusion)
        conf, correct = [], []
        for it in scenario.items:
            v = method([JudgeVote(**{k: x for k, x in vote.items() if k != "signals"}) for vote in it.votes])
            conf.append(v.confidence)
            correct.append(v.choice is not None and v.choice == it.label)
        t0 = time.perf_counter()
        res = sim.simulate(np.asarray(conf), np.asarray(correct, dtype=float), name=scenario.name,
                           streams=streams, audit_rate=scenario.audit_rate, target=scenario.target)
        print(f"\n-- in-process simulation ({streams} resampled streams): {scenario.name}")
        print(res.table())
        print(f"({time.perf_counter() - t0:.1f} s)")


async def main(sim_streams: int = 100) -> None:
    root = data_dir()
    if not root.is_dir():
        raise SystemExit(f"data not found at {root}: set JUDGEFUSE_SHARED_DATA")
    scenarios = [toe_scenario(root), judgebench_scenario(root)]
    t0 = time.perf_counter()
    for scenario in scenarios:
        with tempfile.TemporaryDirectory() as tmp:
            report(await run_scenario(scenario, Path(tmp)))
    run_simulation(scenarios, sim_streams)
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    import logging

    logging.disable(logging.WARNING)  # the open-mode warning: this is a loopback benchmark
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100))
