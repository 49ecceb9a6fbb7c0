"""The learning loop over HTTP: refits are promoted with their thresholds, so routing goes on.

Why (docs/design.md, 'Learning keeps routing'): a promoted refit used to switch auto-accept
off (the tuned threshold named the previous model, and nothing retuned). Now a refit candidate
is promoted only together with a threshold tuned for it on the same labels, from cross-fitted
confidences, on the population (:mod:`judgefuse.service.learning.paired_threshold`). This replays a labelled stream
through a real gateway and prints, window by window, what serves and how it routes.

Setup: a real gateway (uvicorn on loopback, SQLite in a temporary folder) with a panel of three
``external: true`` judges of skill 0.8 / 0.7 / 0.6 whose confidences are informative (right:
uniform in [0.65, 0.95]; wrong: uniform in [0.5, 0.75]); votes are posted through
``POST /v1/fuse/batch``; a simulated annotator works the review queue (review route and audit
draws) through ``GET /v1/review/next`` + ``POST /v1/feedback`` with the true
labels after every batch (``audit_rate`` 0.2). ``refit_every_labels`` 50 (background refits,
counted in storage; at least 100 labels to fit).
The first ``--warmup`` verdicts have no threshold (all reviewed; refits promote learned models
on Brier alone, with no threshold to pair); then one ``POST /v1/thresholds/tune`` of the active
method (target 0.85, delta 0.1), which, a learned model serving unpaired, refits it at that
target and promotes the pair; then the rest.

Printed per window of 100 verdicts: the method and model version serving, the threshold
versions that routed them, the auto-accept rate, the realised precision of what was
auto-accepted, and how many went to review because a threshold did not apply to the verdict's
method or model (``method_mismatch`` / ``model_mismatch``: must be 0 after the first tune).
Then every promotion (model version, its paired threshold, both models' review load).

Run from the repository root (about a minute)::

    PYTHONPATH=. python benchmarks/bench_learning_loop.py [--verdicts 1200] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import random
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from judgefuse.service.settings import Settings

HERE = Path(__file__).resolve().parent
SKILLS = {"j1": 0.8, "j2": 0.7, "j3": 0.6}
TARGET = 0.85


def _review_loop_module() -> Any:
    """bench_review_loop's server and annotator helpers (benchmarks is not a package)."""
    spec = importlib.util.spec_from_file_location("bench_review_loop", HERE / "bench_review_loop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_review_loop"] = module
    spec.loader.exec_module(module)
    return module


def make_stream(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    items = []
    for i in range(n):
        truth = rng.choice("AB")
        votes = []
        for judge, skill in SKILLS.items():
            right = rng.random() < skill
            choice = truth if right else ("B" if truth == "A" else "A")
            confidence = rng.uniform(0.65, 0.95) if right else rng.uniform(0.5, 0.75)
            votes.append({"judge": judge, "choice": choice, "confidence": round(confidence, 4)})
        items.append({"id": f"s{seed}-{i}", "question": f"item {i}", "answer_a": "a", "answer_b": "b",
                      "truth": truth, "votes": votes})
    return items


async def run(verdicts: int, warmup: int, seed: int) -> None:
    loop = _review_loop_module()
    folder = Path(tempfile.mkdtemp(prefix="jf-learning-"))
    judges = "".join(f"  - {{name: {j}, external: true, mode: sc}}\n" for j in SKILLS)
    panel = folder / "panel.yaml"
    panel.write_text(textwrap.dedent("""\
        name: loop
        fusion: majority
        quorum: 1
        audit_rate: 0.2
        judges:
        """) + judges, encoding="utf-8")
    settings = Settings(storage_url=f"sqlite:///{folder / 'db.sqlite3'}", panels=[panel],
                        auth_disabled=True, refit_every_labels=50, min_labels_for_refit=100,
                        state_ttl_s=0.0, review_seed=seed)
    stream = make_stream(verdicts, seed)
    truth = {it["id"]: it["truth"] for it in stream}
    started = time.perf_counter()
    out: list[dict[str, Any]] = []
    async with loop.serve(settings) as url, httpx.AsyncClient(base_url=url, timeout=60) as client:
        for start in range(0, verdicts, 50):
            if start == warmup:
                # the active method: by now a learned model promoted without a target serves,
                # so the tune refits it at this target and promotes the pair
                tuned = (await client.post("/v1/thresholds/tune", json={
                    "panel": "loop", "target_precision": TARGET, "delta": 0.1, "min_count": 30})).json()
                refit = tuned.get("refit") or {}
                print(f"first tune after {warmup} verdicts ({tuned['method']}): stored {tuned['stored']} "
                      f"({tuned['reason']}); refit {refit.get('status')}: threshold {refit.get('threshold')} "
                      f"(version {refit.get('threshold_version')})")
            chunk = stream[start:start + 50]
            out += await _post(client, chunk)
            await loop.work_queue(client, "loop", truth)
            await asyncio.sleep(0)  # let background refits start
        await asyncio.sleep(1.0)
        models = (await client.get("/v1/fusion/models", params={"panel": "loop"})).json()
        metrics_text = (await client.get("/metrics")).text
        last = (await client.post("/v1/fusion/refit", json={"panel": "loop"})).json()
        thresholds = (await client.get("/v1/thresholds", params={"panel": "loop"})).json()
    print(f"{verdicts} verdicts in {time.perf_counter() - started:.1f} s\n")
    print(f"{'window':>11}  {'method / model':<24} {'threshold versions':<19} {'auto %':>6} "
          f"{'precision':>9} {'mismatch':>8}")
    mismatch_after_tune = 0
    for w in range(0, verdicts, 100):
        window = out[w:w + 100]
        models_seen = sorted({f"{v['method']}/{v['model_version'] or '-'}" for v in window})
        versions = sorted({str(v["threshold"]["version"]) for v in window})
        auto = [v for v in window if v["route"] == "auto_accept"]
        right = [v["choice"] == truth[v["id"]] for v in auto]
        mismatch = sum(v["threshold"].get("code") in ("method_mismatch", "model_mismatch") for v in window)
        if w >= warmup:
            mismatch_after_tune += mismatch
        precision = f"{sum(right) / len(right):.3f}" if right else "-"
        print(f"{w:>5}-{w + len(window):<5}  {', '.join(models_seen)[:24]:<24} {','.join(versions):<19} "
              f"{100 * len(auto) / len(window):>5.1f}% {precision:>9} {mismatch:>8}")
    auto_all = [v for v in out[warmup:] if v["route"] == "auto_accept"]
    realised = sum(v["choice"] == truth[v["id"]] for v in auto_all) / max(1, len(auto_all))
    print(f"\nafter the first tune: {len(auto_all)} of {len(out) - warmup} auto-accepted "
          f"({100 * len(auto_all) / max(1, len(out) - warmup):.1f}%), realised precision {realised:.3f} "
          f"(target {TARGET}); routed to review for a method/model mismatch: {mismatch_after_tune}")
    print("\npromotions (model version -> paired threshold):")
    for record in models["history"]:
        paired = record.get("threshold") or {}
        metrics = record.get("metrics", {})
        print(f"  v{record['version']} {record['params'].get('model_version')}: threshold "
              f"{paired.get('threshold')} (version {paired.get('version')}); review load "
              f"{metrics.get('stacked_review_load', float('nan')):.3f} vs majority "
              f"{metrics.get('baseline_review_load', float('nan')):.3f}; Brier "
              f"{metrics.get('stacked_brier', float('nan')):.4f} vs {metrics.get('baseline_brier', float('nan')):.4f}")
    outcomes = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name == "judgefuse_refits":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    outcomes[sample.labels["outcome"]] = int(sample.value)
    print(f"threshold versions stored: {len(thresholds.get('history', []))}; refit outcomes: {outcomes}")
    print(f"one more refit now: {last['status']}: {last['reason']}")


async def _post(client: httpx.AsyncClient, chunk: list[dict[str, Any]]) -> list[dict[str, Any]]:
    body = {"items": [{k: it[k] for k in ("id", "question", "answer_a", "answer_b", "votes")} | {"panel": "loop"}
                      for it in chunk]}
    r = await client.post("/v1/fuse/batch", json=body)
    r.raise_for_status()
    results = r.json()["results"]
    bad = [res for res in results if res["status"] != 200]
    if bad:
        raise RuntimeError(f"/v1/fuse/batch: {bad[0]['error']}")
    return [res["verdict"] for res in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--verdicts", type=int, default=1200)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(run(args.verdicts, args.warmup, args.seed))


if __name__ == "__main__":
    main()
