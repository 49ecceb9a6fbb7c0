"""Benchmark: ``judgefuse export`` and a retention pass on N stored verdicts in SQLite.

Builds a SQLite file with N verdict records (default 200,000; three judges with one-line
explanations and a one-line prompt, 10% labelled, 2% waiting for review, the rest auto-accepted) through
the storage's own schema, then:

* runs ``judgefuse export`` in a child process, for every record and for the labelled ones,
  and for a quarter of the records (``--until``), printing rows/s and the child's peak RSS
  (``ru_maxrss``): constant memory means the peak does not grow with the rows exported;
* runs ``apply_retention`` dropping the older half (``keep_labelled`` = the default
  ``refit_max_labels``, 20,000), printing rows/s, the longest single batch transaction (how long
  a writer may wait) and the file size before and after (incremental vacuum).

Run: ``python benchmarks/bench_export.py [N]``. Keep N modest on a shared machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.service.storage import ReviewStamp, SQLiteStorage, VerdictRecord
from judgefuse.service.storage.sqlite import retention as sqlite_retention

T0 = 1_790_000_000.0


def record(n: int) -> VerdictRecord:
    votes = [JudgeVote(judge=f"judge-{j}", mode="sc", choice="A" if (n + j) % 3 else "B",
                       confidence=0.6 + 0.1 * j, explanation="Output (a) answers the question "
                       "directly and correctly; (b) does not.", raw='{"selected_output": '
                       '"Output (a)", "confidence_score": 80}') for j in range(3)]
    verdict = Verdict(choice="A", confidence=0.8, p_a=0.8, method="majority", votes=votes,
                      n_valid=3, n_invalid=0, id=f"v{n:07d}", route="human_review", threshold=0.9)
    queued = n % 50 == 1 or n % 10 == 0  # 12% reviewed (the labelled ones among them)
    stamp = ReviewStamp(stratum="review" if queued else "none", inclusion_probability=1.0 if queued
                        else 0.0, reason="below_threshold" if queued else "auto_accept",
                        rank=(n * 0.618) % 1.0)
    item = PairwiseItem(id=f"v{n:07d}", question=f"What is {n} + 1? Answer with a number.",
                        answer_a=str(n + 1), answer_b=str(n + 2))
    return VerdictRecord(id=f"v{n:07d}", tenant="acme", panel="main", created_at=T0 + n,
                         verdict=verdict, item=item, review=stamp)


def build(path: Path, n: int) -> None:
    """The file, through the storage's schema; rows bulk-inserted (the write path is measured
    by bench_gateway, not here). Labelled records carry their label in the row and body;
    queued unlabelled ones are in the review queue."""
    asyncio.run(_create(path))
    import sqlite3

    conn = sqlite3.connect(path)
    rows, queue = [], []
    for i in range(n):
        rec = record(i)
        labelled = i % 10 == 0
        if labelled:
            rec = rec.model_copy(update={"label": "A", "labelled_at": rec.created_at + 60})
        elif rec.review is not None and rec.review.queued:
            queue.append(("acme", "main", rec.id, "review", rec.review.rank))
        rows.append(("acme", rec.id, "main", rec.created_at, rec.label, rec.labelled_at,
                     rec.model_dump_json()))
        if len(rows) == 20_000:
            conn.executemany("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            rows.clear()
    conn.executemany("INSERT INTO verdicts VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    conn.executemany("INSERT INTO review_queue (tenant, panel, id, stratum, rank) "
                     "VALUES (?, ?, ?, ?, ?)", queue)
    conn.commit()
    conn.close()


async def _create(path: Path) -> None:
    async with SQLiteStorage(path):
        pass


def export(db: Path, out: Path, *flags: str) -> dict[str, float]:
    """``judgefuse export`` in a child process: wall time, rows, peak RSS of the child."""
    code = ("import sys, time, resource, json; from judgefuse.cli import main; "
            "t = time.perf_counter(); status = main(sys.argv[1:]); "
            "took = time.perf_counter() - t; "
            "print(json.dumps({'status': status, 'seconds': took, "
            "'rss_mb': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "export", "--storage", str(db), "--quiet",
                           *flags, str(out)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    wall = time.perf_counter() - started
    child = json.loads(done.stdout.strip().splitlines()[-1])
    with out.open("rb") as handle:
        rows = sum(1 for _ in handle)
    took = child["seconds"]  # the command itself (interpreter start and imports excluded)
    return {"rows": rows, "seconds": took, "rows_per_s": rows / took, "process_wall_s": wall,
            "peak_rss_mb": child["rss_mb"], "bytes": out.stat().st_size}


async def retention(db: Path, n: int) -> dict[str, float]:
    longest = 0.0
    original = sqlite_retention.retention_batch

    def timed(conn, **kwargs):  # noqa: ANN001, ANN003 (a timing wrapper around the real batch)
        nonlocal longest
        t = time.perf_counter()
        out = original(conn, **kwargs)
        longest = max(longest, time.perf_counter() - t)
        return out

    import judgefuse.service.storage.sqlite.backend as sqlite_module

    sqlite_module.retention_batch = timed  # type: ignore[assignment]
    try:
        size_before = db.stat().st_size
        async with SQLiteStorage(db) as store:
            started = time.perf_counter()
            report = await store.apply_retention(older_than=T0 + n / 2, keep_labelled=20_000)
            took = time.perf_counter() - started
    finally:
        sqlite_module.retention_batch = original
    return {"scanned": n // 2, "dropped": report.dropped, "kept_pending": report.kept_pending,
            "kept_labelled": report.kept_labelled, "seconds": took,
            "rows_per_s": (n // 2) / took, "longest_batch_ms": longest * 1000,
            "file_mb_before": size_before / 2**20, "file_mb_after": db.stat().st_size / 2**20}


def main(n: int = 200_000) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.sqlite3"
        started = time.perf_counter()
        build(db, n)
        print(f"built {n:,} records in {time.perf_counter() - started:.1f} s, "
              f"{db.stat().st_size / 2**20:.0f} MB ({db.stat().st_size / n:.0f} B/record)")
        results: dict[str, object] = {"n": n}
        for name, flags in (("quarter", ["--until", repr(T0 + n / 4)]), ("all", []),
                            ("labelled", ["--labelled-only"])):
            res = export(db, Path(tmp) / f"{name}.jsonl", *flags)
            results[f"export_{name}"] = res
            print(f"export {name:>8}: {res['rows']:>8,} rows in {res['seconds']:6.1f} s = "
                  f"{res['rows_per_s']:7,.0f} rows/s (process {res['process_wall_s']:.1f} s), peak RSS {res['peak_rss_mb']:.0f} MB, "
                  f"{res['bytes'] / 2**20:.0f} MB written")
        ret = asyncio.run(retention(db, n))
        results["retention"] = ret
        print(f"retention: {ret['scanned']:,} old rows scanned in {ret['seconds']:.1f} s = "
              f"{ret['rows_per_s']:,.0f} rows/s; dropped {ret['dropped']:,}, kept "
              f"{ret['kept_pending']:,} pending + {ret['kept_labelled']:,} labelled; longest batch "
              f"{ret['longest_batch_ms']:.0f} ms; file {ret['file_mb_before']:.0f} MB -> "
              f"{ret['file_mb_after']:.0f} MB")
        print(f"(parent peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB)")
    return results


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 200_000)
