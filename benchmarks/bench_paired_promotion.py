"""A refit that lands after a tune: is the promoted model paired, does auto-accept stay on? (issue 45)

Why (docs/design.md, 'Learning keeps routing'): a background refit read the panel's target when
its job was made, and its worker fitted later; a target tuned in between met a model promoted
*without* a threshold, and every verdict of it went to review as ``method_mismatch`` until the
next refit (auto-accepted per block after the tune [18, 0, 50, 50, ...], 50 mismatches). Now a
promotion is decided against the pair in force when it is written (one compare-and-set).

The scenario, per run: a real gateway (uvicorn on loopback, SQLite in a temporary folder), three
OpenAI-compatible stub judges over HTTP in SC mode with skills 0.8 / 0.7 / 0.6 (confidence
85-97 when right, 55-75 when wrong, drawn per run seed), a panel with ``fusion: majority``,
labels sent inline with each request, background refits every 50 labels (at least 50);
``--warmup`` verdicts, then ``POST /v1/thresholds/tune`` at target 0.8 (delta 0.1), then
``--blocks`` blocks of 50 verdicts. Printed per run: auto-accepted per block after the tune,
verdicts routed to review for a model/threshold mismatch, and the refits' outcomes from the
gateway's log (an unpaired promotion after the tune is a failure).

What a block can auto-accept before a learned model serves with its threshold: majority's
confidence is the winner's share of the votes (2/3 or 1), whatever confidence the judges state.
At skills 0.8 / 0.7 / 0.6 a 2-1 verdict is right 70.6% of the time, a unanimous one 93.3%, all
of them 78.8%; so majority's threshold at target 0.8 is 1.0 (36% auto-accepted, ~18 of 50), or
review everything when the warm-up's labels cannot show 0.8 at delta 0.1 (0 of 50). Every block
auto-accepts more than half only when a learned model is promoted before the tune (the tune
then pairs it) or the first paired promotion lands within the first block. ``--settle S`` waits
up to S seconds before the tune for the warm-up's refits to finish (``judgefuse_refits_total``
counts one outcome per 50 labels); without it a refit that straddles the tune is voided and run
again at the target (``retried``), and the blocks until it lands are majority's.

``--parallel`` gateways run at once (separate processes, so the refit workers compete for the
CPU as on a busy host). Run from the repository root::

    PYTHONPATH=. python benchmarks/bench_paired_promotion.py --runs 20 --parallel 4 --pace 2 [--settle 120]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import re
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
sys.path.insert(0, str(HERE.parent / "tests"))
from jf_test_support import openai_stub as stub_module  # noqa: E402

SKILLS = {"j1": 0.8, "j2": 0.7, "j3": 0.6}
TARGET, DELTA, BLOCK = 0.8, 0.1, 50
MISMATCH = ("method_mismatch", "model_mismatch")
ITEM = re.compile(r"\[item (\d+) truth ([AB])\]")
KEY_ENV = "JF_BENCH_STUB_KEY"


def truth_of(seed: int, i: int) -> str:
    return random.Random(f"{seed}/truth/{i}").choice("AB")


def answer(seed: int, body: dict[str, Any]) -> stub_module.Reply:
    """The judge ``body["model"]`` on the item its prompt names: right with its skill,
    confident when right, less when wrong (module docstring)."""
    judge = str(body.get("model", "")).split("/")[-1]
    text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
    match = ITEM.search(text)
    i, truth = (int(match.group(1)), match.group(2)) if match else (0, "A")
    rng = random.Random(f"{seed}/{judge}/{i}")
    right = rng.random() < SKILLS.get(judge, 0.5)
    choice = truth if right else ("B" if truth == "A" else "A")
    confidence = rng.randint(85, 97) if right else rng.randint(55, 75)
    return stub_module.Reply(texts=json.dumps({"selected_output": f"Output ({choice.lower()})",
                                               "confidence_score": confidence, "explanation": "-"}))


def item(seed: int, i: int) -> dict[str, Any]:
    truth = truth_of(seed, i)
    return {"id": f"p{seed}-{i}", "question": f"Which is better? [item {i} truth {truth}]",
            "answer_a": "one", "answer_b": "two", "label": truth}


async def _post(client: httpx.AsyncClient, seed: int, start: int, stop: int, pace: float) -> list[dict[str, Any]]:
    """Items ``start..stop-1`` through ``/v1/judge/batch``, 25 a request and one request every
    ``pace`` seconds at most (the stubs answer at once; traffic this fast would end a run before
    its first refit's worker started). A 429 is sent again after its Retry-After."""
    out: list[dict[str, Any]] = []
    for first in range(start, stop, 25):
        began = time.monotonic()
        body = {"items": [item(seed, i) for i in range(first, min(first + 25, stop))]}
        for _attempt in range(100):
            r = await client.post("/v1/judge/batch", json=body)
            if r.status_code != 429:
                break
            await asyncio.sleep(float(r.headers.get("retry-after", "0.5")))
        r.raise_for_status()
        bad = [res for res in r.json()["results"] if res["status"] != 200]
        if bad:
            raise RuntimeError(f"/v1/judge/batch: {bad[0]['error']}")
        out += [res["verdict"] for res in r.json()["results"]]
        await asyncio.sleep(max(0.0, pace - (time.monotonic() - began)))
    return out


async def _settle(client: httpx.AsyncClient, rounds: int, limit: float) -> float:
    """Wait until the gateway has counted ``rounds`` refit outcomes (``judgefuse_refits_total``:
    the warm-up's background refits have finished) or ``limit`` seconds have passed; the
    seconds waited."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        text = (await client.get("/metrics")).text
        done = sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith("judgefuse_refits_total{"))
        if done >= rounds:
            break
        await asyncio.sleep(0.5)
    return round(time.monotonic() - began, 1)


class _Refits(logging.Handler):
    """Collects the gateway's 'refit <tenant>/<panel>: <status> (<reason>)' log lines."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("refit "):
            self.lines.append((time.monotonic(), message))


async def run_one(seed: int, warmup: int, blocks: int, pace: float, settle: float = 0.0) -> dict[str, Any]:
    import bench_review_loop as loop

    from judgefuse.service.settings import Settings

    os.environ[KEY_ENV] = "bench"
    refits = _Refits()
    logging.getLogger("judgefuse.service").addHandler(refits)
    logging.getLogger("judgefuse.service").setLevel(logging.INFO)
    folder = Path(tempfile.mkdtemp(prefix="jf-paired-"))
    server = await stub_module.StubServer().start()
    server.handler = lambda body: answer(seed, body)
    judges = "".join(textwrap.dedent(f"""\
          - name: {j}
            model: openai/{j}
            backend: direct
            api_base: {server.url}
            api_key_env: {KEY_ENV}
            mode: sc
            timeout_s: 10
        """) for j in SKILLS)
    panel = folder / "panel.yaml"
    panel.write_text("name: p\nfusion: majority\nquorum: 2\ndeadline_s: 30\njudges:\n"
                     + textwrap.indent(judges, "  "), encoding="utf-8")
    settings = Settings(storage_url=f"sqlite:///{folder / 'db.sqlite3'}", panels=[panel], auth_disabled=True,
                        review_seed=seed, refit_every_labels=50, min_labels_for_refit=50)
    started = time.perf_counter()
    try:
        async with loop.serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=120) as client:
            await _post(client, seed, 0, warmup, pace)
            settled = await _settle(client, warmup // 50, settle) if settle > 0 else 0.0
            before = (await client.get("/v1/fusion/models", params={"panel": "p"})).json()
            tuned = (await client.post("/v1/thresholds/tune", json={
                "panel": "p", "target_precision": TARGET, "delta": DELTA})).json()
            tuned_at = time.monotonic()
            per_block: list[int] = []
            mismatches = 0
            for b in range(blocks):
                verdicts = await _post(client, seed, warmup + b * BLOCK, warmup + (b + 1) * BLOCK, pace)
                per_block.append(sum(v["route"] == "auto_accept" for v in verdicts))
                mismatches += sum(v["threshold"]["code"] in MISMATCH for v in verdicts)
            models = (await client.get("/v1/fusion/models", params={"panel": "p"})).json()
    finally:
        await server.stop()
    after = [line for at, line in refits.lines if at > tuned_at]
    return {
        "seed": seed, "seconds": round(time.perf_counter() - started, 1),
        "tune": f"{tuned['method']} {'stored' if tuned['stored'] else 'not stored'} {tuned['threshold']}",
        "settled_s": settled, "served_before": f"{before['active_method']}/{before['model_version'] or '-'}",
        "per_block": per_block, "mismatches": mismatches,
        "promotions": sum(": promoted (" in line for _at, line in refits.lines),
        "unpaired_after_tune": sum(": promoted (" in line and "promoted with threshold" not in line
                                   for line in after),
        "target_moved": sum("the target changed while this refit ran" in line for _at, line in refits.lines),
        "served_after": f"{models['active_method']}/{models['model_version'] or '-'}",
        "refit_log": [line for _at, line in refits.lines],
    }


def fan_out(script: str, seeds: list[int], parallel: int, args: list[str]) -> list[dict[str, Any]]:
    """Each seed's run as ``script --one SEED *args``, a process each, ``parallel`` at a time
    (their refit workers compete for the CPU as on a busy host); what each printed last, as
    JSON (a failed run is said and left out)."""
    results: list[dict[str, Any]] = []
    for first in range(0, len(seeds), parallel):
        batch = seeds[first:first + parallel]
        procs = [subprocess.Popen([sys.executable, script, "--one", str(seed), *args], stdout=subprocess.PIPE,
                                  text=True) for seed in batch]
        for seed, proc in zip(batch, procs, strict=True):
            stdout, _ = proc.communicate()
            if proc.returncode != 0:
                print(f"run {seed} failed (exit {proc.returncode})", flush=True)
                continue
            results.append(json.loads(stdout.strip().splitlines()[-1]))
            print(f"run {seed} done in {results[-1]['seconds']} s", flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=120)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--pace", type=float, default=1.0, help="seconds per request of 25 verdicts")
    parser.add_argument("--settle", type=float, default=0.0,
                        help="before the tune, wait up to this many seconds for the warm-up's refits to finish")
    parser.add_argument("--one", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(asyncio.run(run_one(args.one, args.warmup, args.blocks, args.pace, args.settle))))
        return
    print(f"paired promotion: {args.runs} runs, {args.parallel} gateways at a time, {args.warmup} verdicts, a "
          f"{f'wait of up to {args.settle:g} s for the refits of the warm-up, a ' if args.settle else ''}"
          f"tune at {TARGET} (delta {DELTA}), then {args.blocks} blocks of {BLOCK}, 25 verdicts every {args.pace:g} s; pass: every block "
          "auto-accepts more than half, 0 mismatch reviews, no unpaired promotion after the tune\n", flush=True)
    results = fan_out(__file__, list(range(args.first_seed, args.first_seed + args.runs)), args.parallel, [
        "--warmup", str(args.warmup), "--blocks", str(args.blocks), "--pace", str(args.pace),
        "--settle", str(args.settle)])
    passing = 0
    print(f"{'seed':>4} {'serving at the tune':<28} {'tune':<30} {'auto-accepted per block after the tune':<42} "
          f"{'mismatch':>8} {'promoted':>8} {'unpaired':>8} {'retried':>7} {'serving after':<30} {'s':>6}")
    for r in results:
        ok = min(r["per_block"]) > BLOCK / 2 and r["mismatches"] == 0 and r["unpaired_after_tune"] == 0
        passing += ok
        print(f"{r['seed']:>4} {r['served_before']:<28} {r['tune']:<30} {str(r['per_block']):<42} {r['mismatches']:>8} {r['promotions']:>8} "
              f"{r['unpaired_after_tune']:>8} {r['target_moved']:>7} {r['served_after']:<30} {r['seconds']:>6}")
    print(f"\nruns passing: {passing} of {args.runs}; mismatch reviews in all: "
          f"{sum(r['mismatches'] for r in results)}; unpaired promotions after a tune: "
          f"{sum(r['unpaired_after_tune'] for r in results)}")
    print("\nrefit log of the first run:")
    for line in results[0]["refit_log"] if results else []:
        print(f"  {line[:220]}")


if __name__ == "__main__":
    main()
