"""Drift after a tune, with background refits: does the alarm name why routing stopped? (issue 45)

Why (docs/design.md, 'Learning keeps routing'): a refit that promoted a model *without* the
threshold it needed (a target had been tuned before it landed) sent every later verdict to
review as ``method_mismatch`` ("retune") instead of ``drift_alarm``; the monitor's alarm no
longer named why routing stopped. Now a promotion is decided against the pair in force when it
is written (one compare-and-set), so with a target it is paired or not made.

The scenario, per run: a real gateway (uvicorn on loopback, SQLite in a temporary folder), a
panel of three ``external: true`` judges (SC votes) fused by ``mean_probability``, audit rate
0.5, default background refits (every 100 labels); a simulated annotator works the review
queue (review and audit draws) after every batch of 50 verdicts posted through
``POST /v1/fuse/batch``, one batch every ``--pace`` seconds at most (posted as fast as the
gateway answers, a run would end before most refits' workers finish). Calm traffic first (bench_calm_tune's stream: the judges agree on a
letter right 92% of the time at confidence ~0.95, a judge strays at 0.6 on 4% of items);
``POST /v1/thresholds/tune`` at target 0.8 (delta 0.1) after ``--warmup`` verdicts; then
``--drift`` verdicts of the same shape whose consensus letter is right only 55% of the time
(the confident ones are wrong 45% of the time). A run passes when the precision monitor
alarms, each of the last 100 verdicts goes to review either named ``drift_alarm`` or below its
threshold (none for a model/threshold mismatch), and the gateway's log has no promotion
without a threshold after the tune.

Run from the repository root (10 runs, 2 at a time)::

    PYTHONPATH=. python benchmarks/bench_drift_promotion.py --runs 10 --parallel 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import tempfile
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import bench_calm_tune as calm  # noqa: E402
from bench_paired_promotion import _Refits, fan_out  # noqa: E402

PANEL = calm.PANEL
TARGET, DELTA, AUDIT, DRIFT_RIGHT = 0.8, 0.1, 0.5, 0.55
MISMATCH = ("method_mismatch", "model_mismatch")


def drifted(stream: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """``stream`` with its consensus letter right ``DRIFT_RIGHT`` of the time: the truth is
    redrawn against the votes (the votes' shape, confident and agreeing, is unchanged)."""
    rng = random.Random(f"{seed}/drift")
    out = []
    for it in stream:
        letters = Counter(v["choice"] for v in it["votes"])
        consensus = letters.most_common(1)[0][0]
        other = "B" if consensus == "A" else "A"
        out.append({**it, "truth": consensus if rng.random() < DRIFT_RIGHT else other})
    return out


async def run_one(seed: int, warmup: int, drift: int, pace: float) -> dict[str, Any]:
    import bench_review_loop as loop

    from judgefuse.service.settings import Settings

    refits = _Refits()
    logging.getLogger("judgefuse.service").addHandler(refits)
    logging.getLogger("judgefuse.service").setLevel(logging.INFO)
    folder = Path(tempfile.mkdtemp(prefix="jf-drift-"))
    judges = "".join(f"  - {{name: {j}, external: true, mode: sc}}\n" for j in calm.JUDGES)
    panel = folder / "panel.yaml"
    panel.write_text(textwrap.dedent(f"""\
        name: {PANEL}
        fusion: mean_probability
        quorum: 1
        audit_rate: {AUDIT}
        judges:
        """) + judges, encoding="utf-8")
    settings = Settings(storage_url=f"sqlite:///{folder / 'db.sqlite3'}", panels=[panel],
                        auth_disabled=True, review_seed=seed)
    stream = calm.make_stream(warmup, seed) + drifted(calm.make_stream(drift, seed, offset=warmup), seed)
    truth = {it["id"]: it["truth"] for it in stream}
    started = time.perf_counter()
    out: list[dict[str, Any]] = []
    async with loop.serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=120) as client:
        for start in range(0, warmup, 50):
            began = time.monotonic()
            await calm._post(client, stream[start:start + 50])
            await calm._work_queue(client, truth)
            await asyncio.sleep(max(0.0, pace - (time.monotonic() - began)))  # refits' workers get time
        tuned = (await calm._call(client, "POST", "/v1/thresholds/tune", json={
            "panel": PANEL, "target_precision": TARGET, "delta": DELTA})).json()
        tuned_at = time.monotonic()
        for start in range(warmup, warmup + drift, 50):
            began = time.monotonic()
            out += await calm._post(client, stream[start:start + 50])
            await calm._work_queue(client, truth)
            await asyncio.sleep(max(0.0, pace - (time.monotonic() - began)))
        monitor = (await calm._call(client, "GET", "/v1/monitor", params={"panel": PANEL})).json()
        models = (await calm._call(client, "GET", "/v1/fusion/models", params={"panel": PANEL})).json()
    last = out[-100:]
    codes = Counter(f"{v['route']}/{v['threshold']['code']}" for v in last)
    promoted = [(at, line) for at, line in refits.lines if ": promoted (" in line]
    unpaired = [(at, line) for at, line in promoted if "promoted with threshold" not in line]
    alarms = [e for e in monitor.get("events", []) if e.get("kind") == "alarm"]
    return {
        "seed": seed, "seconds": round(time.perf_counter() - started, 1),
        "tune": f"{tuned['method']} {'stored' if tuned['stored'] else 'not stored'} {tuned['threshold']}",
        "alarms": len(alarms), "monitor_state": monitor.get("state"),
        "auto_after_tune": sum(v["route"] == "auto_accept" for v in out),
        "last100": dict(codes),
        "last100_drift_alarm": sum(v["threshold"]["code"] == "drift_alarm" for v in last),
        "last100_auto": sum(v["route"] == "auto_accept" for v in last),
        "mismatches": sum(v["threshold"]["code"] in MISMATCH for v in out),
        "last100_mismatch": sum(v["threshold"]["code"] in MISMATCH for v in last),
        "promotions": len(promoted),
        "paired": len(promoted) - len(unpaired),
        "unpaired_before_tune": sum(at <= tuned_at for at, _ in unpaired),
        "unpaired_after_tune": sum(at > tuned_at for at, _ in unpaired),
        "target_moved": sum("the target changed while this refit ran" in line for _at, line in refits.lines),
        "served_after": f"{models['active_method']}/{models['model_version'] or '-'}",
        "refit_log": [line for _at, line in refits.lines],
    }


def passed(r: dict[str, Any]) -> bool:
    return (r["alarms"] > 0 and r["last100_auto"] == 0 and r["last100_mismatch"] == 0
            and r["unpaired_after_tune"] == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--drift", type=int, default=1500)
    parser.add_argument("--pace", type=float, default=2.0, help="seconds per batch of 50 verdicts (and its labels)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(asyncio.run(run_one(args.one, args.warmup, args.drift, args.pace))))
        return
    print(f"drift scenario: {args.runs} runs, {args.parallel} gateways at a time, {args.warmup} calm verdicts, "
          f"50 every {args.pace:g} s, "
          f"a tune at {TARGET} (delta {DELTA}), then {args.drift} verdicts whose confident consensus is right "
          f"{DRIFT_RIGHT:.0%} of the time; audit rate {AUDIT}, default background refits; pass: an alarm, each of "
          "the last 100 verdicts reviewed (drift_alarm or below threshold, no mismatch), no unpaired promotion "
          "after the tune\n", flush=True)
    results = fan_out(__file__, list(range(args.first_seed, args.first_seed + args.runs)), args.parallel, [
        "--warmup", str(args.warmup), "--drift", str(args.drift), "--pace", str(args.pace)])
    print(f"\n{'seed':>4} {'tune':<32} {'alarms':>6} {'last 100 verdicts (route/code)':<58} {'mismatch':>8} "
          f"{'promoted':>8} {'paired':>6} {'unpaired pre/post tune':>22} {'retried':>7} {'serving after':<28}")
    for r in results:
        last = ", ".join(f"{k} {n}" for k, n in sorted(r["last100"].items()))
        print(f"{r['seed']:>4} {r['tune']:<32} {r['alarms']:>6} {last:<58} {r['mismatches']:>8} "
              f"{r['promotions']:>8} {r['paired']:>6} {r['unpaired_before_tune']:>11}/{r['unpaired_after_tune']:<10} "
              f"{r['target_moved']:>7} {r['served_after']:<28}")
    print(f"\nruns passing: {sum(map(passed, results))} of {args.runs}; mismatch reviews in all: "
          f"{sum(r['mismatches'] for r in results)}; unpaired promotions after a tune: "
          f"{sum(r['unpaired_after_tune'] for r in results)}")
    for r in results:
        print(f"\nrefit log of run {r['seed']}:")
        for line in r["refit_log"]:
            print(f"  {line[:240]}")


if __name__ == "__main__":
    main()
