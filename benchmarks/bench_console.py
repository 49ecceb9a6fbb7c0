"""The console's verdict list paging through a large store: each page under 100 ms.

Usage: ``python benchmarks/bench_console.py [--storage sqlite|redis|postgres|URL]
[--verdicts 100000] [--page 50] [--http-every 1]``

Seeds ``--verdicts`` stored verdicts of one panel (three judges' votes, a question and two
answers of a few hundred characters, review strata mixed as a threshold of 0.9 routes them, one
in ten labelled through ``Storage.set_label`` with the ledger's increments), then walks the
list newest to oldest, ``--page`` verdicts a page, and times every page:

(a) the storage query alone (``Storage.list_verdicts``), unfiltered, through all of it;
(b) the page as served: ``GET /console/verdicts`` through the app in process (auth, query
    parsing, the store, the template; no TCP), through all of it (every ``--http-every``-th
    page when set above 1);
(c) filtered walks (served pages): labelled only, wrong, judges disagreeing, confidence below
    0.7, waiting for review (route human_review, not labelled). A filtered page examines at
    most ``SCAN_LIMIT`` records (``judgefuse.service.console.page_routes``), so a rare filter gives
    a short page and a cursor rather than a slow one.

Prints p50 / p99 / max milliseconds per page (wall time and this process's CPU time), the
page count of each walk and the machine's load average when the walk ended. Target: every
page (max) under 100 ms. Start it with the machine otherwise quiet: the figures are wall time.

Before walking, the long-lived heap is frozen out of the garbage collector (``gc.freeze()``),
as the served app does once it has started (``judgefuse.service.app``): without it, walk (a)
ran before the app's start and about one page in a hundred carried a full collection of the
imported modules' objects, 60-90 ms of CPU that no served page pays.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import random
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import httpx  # noqa: E402
from bench_stores import WORDS, Store  # noqa: E402

from judgefuse.fusion.verdict import Verdict  # noqa: E402
from judgefuse.judges.types import JudgeVote, PairwiseItem  # noqa: E402
from judgefuse.service.app import create_app  # noqa: E402
from judgefuse.service.ledger import label_increments, traffic_increments  # noqa: E402
from judgefuse.service.settings import Settings  # noqa: E402
from judgefuse.service.storage import ReviewStamp, Storage, VerdictRecord, storage_from_url  # noqa: E402
from judgefuse.service.storage.verdict_query import VerdictQuery  # noqa: E402

TENANT = "default"
PANEL = "bench"
JUDGES = ("gpt", "claude", "llama")
T0 = 1_790_000_000.0
TEXT = ("The answer explains the reasoning step by step and arrives at a result; "
        "the other one skips a step. ") * 3


def record(i: int, rng: random.Random, *, panel: str = PANEL, created_at: float | None = None) -> VerdictRecord:
    """Verdict ``i``: three judges' votes (70% for A), majority fusion, routed at 0.9."""
    votes = []
    for judge in JUDGES:
        choice = "A" if rng.random() < 0.7 else "B"
        votes.append(JudgeVote(judge=judge, mode="sc", choice=choice, confidence=round(rng.uniform(0.55, 1.0), 2),
                               explanation=f"{judge}: {TEXT[:120]}", latency_s=rng.uniform(0.3, 2.0), calls=1,
                               prompt_tokens=420, completion_tokens=60, cost_usd=0.0004))
    a = sum(v.choice == "A" for v in votes)
    choice = "A" if a >= 2 else "B"
    confidence = max(a, 3 - a) / 3
    route = "auto_accept" if confidence >= 0.9 else "human_review"
    audit = route == "auto_accept" and rng.random() < 0.05
    stratum = "review" if route == "human_review" else ("audit" if audit else "none")
    stamp = ReviewStamp(stratum=stratum, inclusion_probability=1.0 if stratum == "review" else (0.05 if audit else 0.0),
                        reason="below_threshold" if route == "human_review" else ("audit" if audit else "auto_accept"),
                        audit_rate=0.05, rank=rng.random(), route=route)
    vid = f"v{i:07d}"
    verdict = Verdict(choice=choice, confidence=confidence, p_a=confidence if choice == "A" else 1 - confidence,
                      method="majority", votes=votes, n_valid=3, id=vid, route=route, threshold=0.9)
    item = PairwiseItem(id=vid, question=f"Question {i}: {TEXT[:160]}", answer_a=TEXT, answer_b=TEXT[::-1])
    when = T0 + i * 0.5 if created_at is None else created_at
    return VerdictRecord(id=vid, tenant=TENANT, panel=panel, created_at=when, verdict=verdict,
                         item=item, review=stamp, threshold_version=1)


def bench_app(url: str, storage: Storage, workdir: Path) -> Any:
    """The gateway app on ``storage`` with the panel of the seeded verdicts (its judges
    external), no refits; its panel file is written into ``workdir``."""
    panel = workdir / "panel.yaml"
    panel.write_text(textwrap.dedent(f"""\
        name: {PANEL}
        fusion: majority
        quorum: 2
        judges:
        """) + "".join(f"  - {{name: {j}, external: true}}\n" for j in JUDGES), encoding="utf-8")
    settings = Settings(storage_url=url, panels=[panel], refit_every_labels=0)
    return create_app(settings, storage=storage, environ={})


async def seed(storage: Storage, n: int, chunk: int = 500) -> float:
    """Store ``n`` verdicts, ``chunk`` saves at a time, and label one in ten."""
    rng = random.Random(11)
    started = time.perf_counter()
    for first in range(0, n, chunk):
        records = [record(i, rng) for i in range(first, min(n, first + chunk))]
        await asyncio.gather(*(
            storage.save_verdict(TENANT, r, traffic_increments(PANEL, "majority", r.review))  # type: ignore[arg-type]
            for r in records))
        labelled = [r for r in records if rng.random() < 0.1]
        await asyncio.gather(*(
            storage.set_label(TENANT, r.id, "A" if rng.random() < 0.8 else "B", label_increments,
                              labelled_at=r.created_at + 60)
            for r in labelled))
    return time.perf_counter() - started


def _line(label: str, values: list[float]) -> str:
    ms = sorted(t * 1000 for t in values)
    p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
    verdict = "OK" if ms[-1] < 100 else ("p99 OK, max over" if p99 < 100 else "OVER 100 ms")
    return (f"{label} p50 {statistics.median(ms):6.2f}  p99 {p99:6.2f}  max {ms[-1]:7.2f} ms  {verdict}")


def summary(name: str, times: list[tuple[float, float]], rows: int) -> str:
    """Wall time (what the client waits, including any wait for a CPU the machine's other
    jobs hold) and CPU time of this process (all its threads: the page's own cost)."""
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{name:<40} pages {len(times):>5}  rows {rows:>6}  load average {load}\n"
            f"    {_line('wall', [w for w, _ in times])}\n"
            f"    {_line('cpu ', [c for _, c in times])}")


async def walk_store(storage: Storage, query: VerdictQuery, page: int) -> tuple[list[tuple[float, float]], int]:
    times: list[tuple[float, float]] = []
    rows, after = 0, None
    while True:
        started, cpu = time.perf_counter(), time.process_time()
        result = await storage.list_verdicts(TENANT, query, after=after, limit=page, scan_limit=2000)
        times.append((time.perf_counter() - started, time.process_time() - cpu))
        rows += len(result.records)
        if result.next is None:
            return times, rows
        after = result.next


async def walk_http(client: Any, params: str, every: int) -> tuple[list[tuple[float, float]], int]:
    import re

    times: list[tuple[float, float]] = []
    rows, url, index = 0, f"/console/verdicts?panel={PANEL}&{params}", 0
    while True:
        started, cpu = time.perf_counter(), time.process_time()
        response = await client.get(url)
        elapsed = (time.perf_counter() - started, time.process_time() - cpu)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
        if index % every == 0:
            times.append(elapsed)
        index += 1
        rows += response.text.count("<tr data-id=")
        found = re.search(r'<a href="([^"]+)" id="older">', response.text)
        if not found:
            return times, rows
        url = found.group(1).replace("&amp;", "&")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default="sqlite", help=f"{' | '.join(WORDS)} | a URL")
    parser.add_argument("--verdicts", type=int, default=100_000)
    parser.add_argument("--page", type=int, default=50, choices=(25, 50, 100))
    parser.add_argument("--http-every", type=int, default=1, help="time every n-th served page")
    parser.add_argument("--chunk", type=int, default=500,
                        help="saves in flight while seeding (PostgreSQL's pool: 50)")
    parser.add_argument("--workdir", help="keep the store here (sqlite: reused when it already "
                        "holds the verdicts, so a second run skips the seeding)")
    args = parser.parse_args()

    workdir = args.workdir or tempfile.mkdtemp(prefix="bench-console-")
    Path(workdir).mkdir(parents=True, exist_ok=True)
    store = Store(args.storage, workdir)
    try:
        await store.start()
        storage = storage_from_url(store.url)
        await storage.open()
        held = len((await storage.list_verdicts(TENANT, VerdictQuery(panel=PANEL), limit=1)).records)
        if held and args.workdir:
            print(f"store {store.kind}: reusing the verdicts seeded in {workdir}; page size {args.page}")
        else:
            took = await seed(storage, args.verdicts, args.chunk)
            print(f"store {store.kind}: {args.verdicts:,} verdicts of one panel seeded in {took:.1f} s "
                  f"(10% labelled); page size {args.page}")
        gc.collect()
        gc.freeze()  # as the app's start does: full collections skip the imported heap
        results = []
        times, rows = await walk_store(storage, VerdictQuery(panel=PANEL), args.page)
        results.append(summary("(a) Storage.list_verdicts, unfiltered", times, rows))
        print(results[-1], flush=True)
        app = bench_app(store.url, storage, Path(workdir))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                for name, params in [
                    ("(b) GET /console/verdicts, unfiltered", f"limit={args.page}"),
                    ("(c) labelled", f"limit={args.page}&labelled=1"),
                    ("(c) wrong", f"limit={args.page}&wrong=1"),
                    ("(c) judges disagree", f"limit={args.page}&disagreeing=1"),
                    ("(c) confidence below 0.7", f"limit={args.page}&below=0.7"),
                    ("(c) waiting for review", f"limit={args.page}&route=human_review&labelled=0"),
                ]:
                    times, rows = await walk_http(client, params, args.http_every if name.startswith("(b)") else 1)
                    results.append(summary(name, times, rows))
                    print(results[-1], flush=True)
        await storage.close()
    finally:
        store.stop()


if __name__ == "__main__":
    asyncio.run(main())
