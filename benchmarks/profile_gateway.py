"""Where a verdict's CPU goes: py-spy over the gateway under ``bench_gateway``'s load.

Usage: ``python benchmarks/profile_gateway.py [--seconds 15] [--concurrency 32] [--sqlite-sync FULL]
[--path judge|fuse] [--out benchmarks/results/profile_gateway.txt]``

Starts the same three processes as ``bench_gateway.py`` (stub, gateway, load), records the
gateway with ``py-spy record --format raw`` (collapsed stacks, every thread that is not idle)
while a closed loop drives it, and prints two tables from the samples: the functions with the
most *inclusive* samples (a frame anywhere on the stack) restricted to judgefuse, FastAPI,
Starlette, pydantic, uvicorn, sqlite and prometheus frames, and the functions with the most
*self* samples (the leaf frame). Needs ``py-spy`` (``pip install py-spy``) and ptrace rights
over the child (the default when this script started it).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gateway as bg  # noqa: E402

INTERESTING = ("judgefuse", "fastapi", "starlette", "pydantic", "uvicorn", "sqlite", "prometheus",
               "aiohttp", "json", "asyncio")


def parse_collapsed(path: Path) -> tuple[collections.Counter[str], collections.Counter[str], int]:
    """(inclusive samples per frame, self samples per frame, total samples) of a raw py-spy file."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in set(frames):
            inclusive[_short(frame)] += n
        own[_short(frames[-1])] += n
    return inclusive, own, total


def _short(frame: str) -> str:
    """``fn (path/to/module.py:123)`` -> ``fn (module.py)`` so lines of one function add up."""
    name, _, where = frame.partition(" (")
    file = where.rstrip(")").rsplit(":", 1)[0]
    parts = Path(file).parts
    short = "/".join(parts[-2:]) if parts else file
    return f"{name} ({short})"


OWNERS = (
    ("prometheus_client", ("prometheus_client/",)),
    ("storage (judgefuse)", ("service/storage/",)),
    ("drift monitors (service/monitor, calibration)", ("service/monitor", "calibration/")),
    ("metrics (judgefuse)", ("service/metrics",)),
    ("aiohttp (judge calls)", ("aiohttp/", "aiohappyeyeballs/")),
    ("judges + prompts (judgefuse)", ("judges/", "prompts/")),
    ("fusion (judgefuse)", ("fusion/",)),
    ("pydantic", ("pydantic",)),
    ("service (judgefuse: gateway, routes, middleware)", ("service/", "judgefuse/")),
    ("sqlite3 (C, incl. fsync)", ("sqlite3",)),
    ("uvicorn (HTTP protocol, socket writes)", ("uvicorn/",)),
    ("fastapi", ("fastapi/",)),
    ("starlette", ("starlette/",)),
    ("json", ("json/",)),
    ("asyncio / concurrent.futures", ("asyncio/", "concurrent/", "threading")),
)


def by_owner(path: Path) -> str:
    """Each sample charged to the first frame, from the leaf up, that one of :data:`OWNERS`
    claims: where the time went by package, library calls charged to the library."""
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        total += n
        for frame in reversed(stack.split(";")):
            owner = next((name for name, marks in OWNERS if any(m in frame for m in marks)), None)
            if owner is not None:
                counts[owner] += n
                break
        else:
            counts["other (event loop, C)"] += n
    return "\n".join(f"  {100 * n / total:5.1f}%  {name}" for name, n in counts.most_common())


def table(counter: collections.Counter[str], total: int, n: int, keep: tuple[str, ...] | None) -> str:
    rows = []
    for frame, count in counter.most_common():
        if keep is not None and not any(k in frame for k in keep):
            continue
        rows.append(f"  {100 * count / total:5.1f}%  {count:6d}  {frame}")
        if len(rows) == n:
            break
    return "\n".join(rows)


async def drive(url: str, concurrency: int, seconds: float, payload: dict | None,
                open_rate: float = 0.0) -> float:
    """Closed loop at ``concurrency``; or, with ``open_rate``, an open loop at that arrival rate
    (what a pipeline sends: ``bench_gateway.py``'s levels)."""
    if open_rate > 0:
        run = await bg.open_loop_run(url, open_rate, seconds, payload)
        rate, errors = run.achieved, run.errors
    else:
        rate, errors = await bg.closed_loop(url, concurrency, seconds, payload)
    if errors:
        print(f"warning: {errors} failed requests", file=sys.stderr)
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="an open loop at this many requests/s instead of the closed loop")
    parser.add_argument("--sqlite-sync", choices=["FULL", "NORMAL"], default="FULL")
    parser.add_argument("--path", choices=["judge", "fuse"], default="judge")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--gil", action="store_true", help="sample only the thread holding the GIL")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        sys.exit("py-spy not found: pip install py-spy")

    workdir = tempfile.mkdtemp(prefix="profile-gateway-")
    stub_proc, line = bg.spawn("--serve-stub", str(bg.free_port()), str(args.latency_ms))
    stub_url = line.split(" ", 1)[1]
    port = bg.free_port()
    gateway = subprocess.Popen(
        [sys.executable, bg.__file__, "--serve-gateway", str(port), stub_url, str(args.judges), workdir],
        env={**os.environ, "BENCH_SQLITE_SYNC": args.sqlite_sync},
    )
    base = f"http://127.0.0.1:{port}"
    raw = Path(workdir) / "profile.txt"
    payload = None
    url = base + "/v1/judge"
    if args.path == "fuse":
        url = base + "/v1/fuse"
        payload = {**bg.FUSE, "votes": bg.fuse_votes(args.judges)}
    try:
        asyncio.run(bg.wait_http(base + "/readyz"))
        asyncio.run(drive(url, 8, 2.0, payload))  # warm-up
        cmd = [spy, "record", "--pid", str(gateway.pid), "--format", "raw", "--rate", "200",
               "--duration", str(int(args.seconds)), "--output", str(raw), "--nonblocking"]
        if args.gil:
            cmd.append("--gil")
        recorder = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        rate = asyncio.run(drive(url, args.concurrency, args.seconds - 1, payload, args.rate))
        _, err = recorder.communicate(timeout=args.seconds + 60)
        if recorder.returncode != 0 or not raw.exists():
            sys.exit(f"py-spy failed: {err.strip()}")
    finally:
        for proc in (gateway, stub_proc):
            proc.terminate()
        for proc in (gateway, stub_proc):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    inclusive, own, total = parse_collapsed(raw)
    report = "\n".join([
        f"command: python benchmarks/profile_gateway.py {' '.join(sys.argv[1:])}",
        f"POST /v1/{args.path}, {args.judges} SC judges at {args.latency_ms:g} ms, "
        + (f"open loop at {args.rate:g}/s" if args.rate > 0 else f"closed loop concurrency {args.concurrency}")
        + f", SQLite synchronous={args.sqlite_sync}: {rate:.1f} verdicts/s "
        f"while sampled; {total} samples (py-spy raw, 200 Hz, {'GIL holder only' if args.gil else 'non-idle threads'})",
        "",
        "by owner (each sample charged to the nearest frame from the leaf up that a package claims):",
        by_owner(raw),
        "",
        f"top {args.top} inclusive (frame anywhere on the stack), share of all samples:",
        table(inclusive, total, args.top, INTERESTING),
        "",
        f"top {args.top} self (leaf frame):",
        table(own, total, args.top, None),
    ])
    print(report)
    if args.out is not None:
        args.out.write_text(report + "\n")


if __name__ == "__main__":
    main()
