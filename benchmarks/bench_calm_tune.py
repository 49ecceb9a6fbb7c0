"""Calm traffic, background refits, then a tune: does auto-accept stay on? (issue 28, item 0)

Why (docs/design.md, 'Learning keeps routing'): with promotions on any Brier gain, a stacked
model could be promoted on a noise-level difference before any target existed; the tune then
found no labelled verdict of that model, its refit at the target was not promoted, and the
model served with no threshold: 0 of the next 1,500 verdicts auto-accepted in 6 of 12 runs.
Now a promotion needs a gain beyond its noise (service/learning/promotion.py) and a tune ends
with a threshold for the serving model or falls back to the voting method with its threshold
(service/learning/routing_fallback.py).

The scenario, per run: a real gateway (uvicorn on loopback, SQLite in a temporary folder) with a
panel of three ``external: true`` judges fused by ``mean_probability`` (the default); calm
traffic: the judges agree on a letter that is right 92% of the time, each at confidence ~0.95
(a judge strays to the other letter at 0.6 on 4% of items); ``--warmup`` verdicts posted in
batches of 50 through ``POST /v1/fuse/batch`` while a simulated annotator works the review queue
(everything goes to review before a threshold exists) and the default background refits run
every 100 labels; then ``POST /v1/thresholds/tune`` at target 0.8 (delta 0.1); then ``--after``
more verdicts, the annotator still working the queue. A run passes when more than half of the
verdicts after the tune are auto-accepted.

``--parallel`` gateways run at once (separate processes, so the background refits compete for
the CPU as on a busy host), ``--runs`` in all, one seed per run. Printed per run: what served
before the tune and the tune's answer (stored / refit / fallback), the auto-accept share after
it and the realised precision of what was auto-accepted; then the number of passing runs.

Run from the repository root (20 runs, 4 at a time: a few minutes)::

    PYTHONPATH=. python benchmarks/bench_calm_tune.py --runs 20 --parallel 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
JUDGES = ("j1", "j2", "j3")
TARGET = 0.8
PANEL = "calm"


def make_stream(n: int, seed: int, offset: int = 0) -> list[dict[str, Any]]:
    """Calm traffic (module docstring): one consensus letter, right 92% of the time."""
    rng = random.Random(seed * 1_000_003 + offset)
    items = []
    for i in range(offset, offset + n):
        truth = rng.choice("AB")
        other = "B" if truth == "A" else "A"
        consensus = truth if rng.random() < 0.92 else other
        votes = []
        for judge in JUDGES:
            if rng.random() < 0.04:
                votes.append({"judge": judge, "choice": "B" if consensus == "A" else "A", "confidence": 0.6})
            else:
                votes.append({"judge": judge, "choice": consensus,
                              "confidence": round(min(0.99, max(0.9, rng.gauss(0.95, 0.02))), 4)})
        items.append({"id": f"c{seed}-{i}", "question": f"item {i}", "answer_a": "a", "answer_b": "b",
                      "truth": truth, "votes": votes})
    return items


async def _call(client: httpx.AsyncClient, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """One request, retried while admission sheds load (429 + Retry-After) or a kept-alive
    connection is dropped under load (every call here is idempotent: verdict ids replay, a
    label replaces itself)."""
    for attempt in range(100):
        try:
            r = await client.request(method, url, **kwargs)
        except httpx.TransportError:
            if attempt >= 5:
                raise
            await asyncio.sleep(0.5)
            continue
        if r.status_code != 429:
            r.raise_for_status()
            return r
        await asyncio.sleep(float(r.headers.get("retry-after", "0.5")))
    raise RuntimeError(f"{method} {url}: still 429 after 100 tries")


async def _post(client: httpx.AsyncClient, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"items": [{k: it[k] for k in ("id", "question", "answer_a", "answer_b", "votes")} | {"panel": PANEL}
                      for it in chunk]}
    results = (await _call(client, "POST", "/v1/fuse/batch", json=body)).json()["results"]
    bad = [res for res in results if res["status"] != 200]
    if bad:
        raise RuntimeError(f"/v1/fuse/batch: {bad[0]['error']}")
    return [res["verdict"] for res in results]


async def _work_queue(client: httpx.AsyncClient, truth: dict[str, str]) -> int:
    """The simulated annotator: lease, label with the truth, until the queue is empty."""
    done = 0
    while True:
        r = await _call(client, "GET", "/v1/review/next", params={"panel": PANEL, "n": 50, "annotator": "sim"})
        items = r.json()["items"]
        if not items:
            return done
        for item in items:
            await _call(client, "POST", "/v1/feedback",
                        json={"verdict_id": item["verdict_id"], "label": truth[item["verdict_id"]]})
            done += 1


async def run_one(seed: int, warmup: int, after: int) -> dict[str, Any]:
    import bench_review_loop as loop

    from judgefuse.service.settings import Settings

    folder = Path(tempfile.mkdtemp(prefix="jf-calm-"))
    judges = "".join(f"  - {{name: {j}, external: true, mode: sc}}\n" for j in JUDGES)
    panel = folder / "panel.yaml"
    panel.write_text(textwrap.dedent(f"""\
        name: {PANEL}
        quorum: 1
        judges:
        """) + judges, encoding="utf-8")
    settings = Settings(storage_url=f"sqlite:///{folder / 'db.sqlite3'}", panels=[panel],
                        auth_disabled=True, review_seed=seed)
    stream = make_stream(warmup + after, seed)
    truth = {it["id"]: it["truth"] for it in stream}
    started = time.perf_counter()
    async with loop.serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=120) as client:
        for start in range(0, warmup, 50):
            await _post(client, stream[start:start + 50])
            await _work_queue(client, truth)
            await asyncio.sleep(0)  # let background refits start
        before = (await _call(client, "GET", "/v1/fusion/models", params={"panel": PANEL})).json()
        tuned = (await _call(client, "POST", "/v1/thresholds/tune", json={
            "panel": PANEL, "target_precision": TARGET, "delta": 0.1, "min_count": 30})).json()
        out: list[dict[str, Any]] = []
        for start in range(warmup, warmup + after, 50):
            out += await _post(client, stream[start:start + 50])
            await _work_queue(client, truth)
            await asyncio.sleep(0)
        models = (await _call(client, "GET", "/v1/fusion/models", params={"panel": PANEL})).json()
    accepted = [v for v in out if v["route"] == "auto_accept"]
    right = sum(v["choice"] == truth[v["id"]] for v in accepted)
    refit = tuned.get("refit") or {}
    fallback = tuned.get("fallback") or {}
    return {
        "seed": seed, "seconds": round(time.perf_counter() - started, 1),
        "served_before": f"{before['active_method']}/{before['model_version'] or '-'}",
        "promotions_before": sum(not m["params"].get("retired") for m in before["history"]),
        "tune_method": tuned["method"], "tune_stored": tuned["stored"], "tune_threshold": tuned["threshold"],
        "refit": refit.get("status"), "fallback": fallback.get("status"),
        "fallback_method": fallback.get("method"), "fallback_threshold": fallback.get("threshold"),
        "after": len(out), "auto_accepted": len(accepted),
        "precision": right / len(accepted) if accepted else None,
        "served_after": f"{models['active_method']}/{models['model_version'] or '-'}",
        "methods_after": sorted({v["method"] for v in out}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--after", type=int, default=1500)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(asyncio.run(run_one(args.one, args.warmup, args.after))))
        return
    print(f"calm scenario: {args.runs} runs, {args.parallel} gateways at a time, {args.warmup} verdicts "
          f"before a tune at target {TARGET}, {args.after} after; pass: > 50% auto-accepted after the tune\n")
    results: list[dict[str, Any]] = []
    failed: list[int] = []
    for first in range(0, args.runs, args.parallel):
        seeds = range(first, min(first + args.parallel, args.runs))
        procs = [subprocess.Popen(
            [sys.executable, __file__, "--one", str(seed), "--warmup", str(args.warmup), "--after", str(args.after)],
            stdout=subprocess.PIPE, text=True) for seed in seeds]
        for seed, proc in zip(seeds, procs, strict=True):
            stdout, _ = proc.communicate()
            if proc.returncode != 0:
                failed.append(seed)
                print(f"run {seed} failed (exit {proc.returncode}): counted as not passing", flush=True)
                continue
            results.append(json.loads(stdout.strip().splitlines()[-1]))
            print(f"run {seed} done: {results[-1]['auto_accepted']}/{results[-1]['after']} auto-accepted", flush=True)
    print(f"{'seed':>4} {'before the tune':<22} {'tune':<26} {'refit':<8} {'fallback':<20} "
          f"{'auto-accepted':>14} {'precision':>9} {'s':>6}")
    passing = 0
    for r in results:
        share = r["auto_accepted"] / max(1, r["after"])
        passing += share > 0.5
        tune = f"{r['tune_method']} {'stored' if r['tune_stored'] else 'not stored'}"
        fallback = f"{r['fallback'] or '-'} {r['fallback_method'] or ''}".strip()
        precision = f"{r['precision']:.3f}" if r["precision"] is not None else "-"
        print(f"{r['seed']:>4} {r['served_before']:<22} {tune:<26} {str(r['refit'] or '-'):<8} {fallback:<20} "
              f"{r['auto_accepted']:>6}/{r['after']:<5} {100 * share:>3.0f}% {precision:>7} {r['seconds']:>6}")
    promoted = sum(r["promotions_before"] > 0 for r in results)
    print(f"\nruns auto-accepting more than half after the tune: {passing} of {args.runs} (target: all; "
          f"{len(failed)} runs failed to complete: {failed})")
    print(f"runs with a learned model promoted before the tune: {promoted} of {len(results)}")
    accepted = [r for r in results if r["precision"] is not None]
    if accepted:
        low = min(r["precision"] for r in accepted)
        print(f"lowest realised precision of the auto-accepted, per run: {low:.3f} (target {TARGET})")


if __name__ == "__main__":
    main()
