"""Benchmark: ``judgefuse export``'s peak memory on large records (issue: ~370 kB records, a
1,000-row page, peaked at 515 MB before export paged by bytes; storage/paging.py).

Builds a SQLite file with N verdict records whose stored item carries an answer of S bytes
(default 1,000 x 370 kB), then runs ``judgefuse export`` in a child process and prints the
child's peak RSS (``ru_maxrss``) and the stored bytes, next to the same export of N small
records (the baseline memory of a Python process with judgefuse loaded).

Run: ``python benchmarks/bench_export_memory.py [N] [S]``.
"""

from __future__ import annotations

import asyncio
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote, PairwiseItem
from judgefuse.service.storage import SQLiteStorage, VerdictRecord

T0 = 1_790_000_000.0


def record(n: int, answer_bytes: int) -> VerdictRecord:
    votes = [JudgeVote(judge=f"judge-{j}", mode="sc", choice="A", confidence=0.8) for j in range(3)]
    verdict = Verdict(choice="A", confidence=0.8, p_a=0.8, method="majority", votes=votes, n_valid=3,
                      n_invalid=0, id=f"v{n:07d}", route="auto_accept", threshold=0.7)
    item = PairwiseItem(id=f"v{n:07d}", question="Write the function.", answer_a="x" * answer_bytes,
                        answer_b="y")
    return VerdictRecord(id=f"v{n:07d}", tenant="acme", panel="main", created_at=T0 + n, verdict=verdict,
                         item=item)


async def build(path: Path, n: int, answer_bytes: int) -> None:
    async with SQLiteStorage(path, synchronous="NORMAL") as store:
        for i in range(n):
            await store.save_verdict("acme", record(i, answer_bytes))


def export_peak_mb(path: Path, out: Path) -> tuple[float, float]:
    started = time.perf_counter()
    child = subprocess.run([sys.executable, "-m", "judgefuse.cli", "export", "--storage", f"sqlite:///{path}",
                            "--quiet", str(out)], capture_output=True, text=True)
    took = time.perf_counter() - started
    if child.returncode != 0:
        raise SystemExit(child.stderr)
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0, took


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    size = int(sys.argv[2]) if len(sys.argv) > 2 else 370_000
    with tempfile.TemporaryDirectory() as tmp:
        small, large = Path(tmp) / "small.db", Path(tmp) / "large.db"
        asyncio.run(build(small, n, 100))
        asyncio.run(build(large, n, size))
        base, t_small = export_peak_mb(small, Path(tmp) / "small.jsonl")
        peak, t_large = export_peak_mb(large, Path(tmp) / "large.jsonl")  # ru_maxrss: max over children
        stored = large.stat().st_size / 1e6
    print(f"export of {n:,} records of ~{size / 1000:.0f} kB ({stored:,.0f} MB stored): peak RSS {peak:,.0f} MB "
          f"in {t_large:.1f} s; the same {n:,} records with 100-byte answers: {base:,.0f} MB in {t_small:.1f} s")


if __name__ == "__main__":
    main()
