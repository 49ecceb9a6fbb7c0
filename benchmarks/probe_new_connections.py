"""Which accepted requests are slow past capacity: those on a new connection, or on a reused one?

Usage: ``python benchmarks/probe_new_connections.py [--rate 1100] [--seconds 6] [--tree .]``
(settings as ``JUDGEFUSE_*`` environment variables, e.g. ``JUDGEFUSE_SERVER__MAX_INFLIGHT_WORK=32``).

Why it exists: ``/v1/fuse`` at 150% of its max had an accepted p99 of 0.5-1.8 s while the
gateway's own view of the same requests (headers read -> answer) stayed under 90 ms. This
drives one gateway (pinned like ``bench_gateway.py``) with the same open loop and records, per
request, whether the load client had to open a new connection for it; past capacity the slow
ones were all on new connections, whose first request the gateway read up to a second after
the client's connect returned, while the loop's turns were long. Prints one line per kind.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_gateway as bg  # noqa: E402
import bench_gateway_ab as ab  # noqa: E402
import load_client as lc  # noqa: E402

RECORDS: list[tuple[bool, float, int]] = []
"""(a new connection was opened for it, seconds from the call to the answer, status)."""


class ProbeClient(lc.LoadClient):
    """The benchmark's load client, noting per request whether it opened a connection."""

    async def post(self, url: str, body: bytes, headers: dict[str, str], timeout_s: float) -> lc.Answer:
        opened = not any(not c.closed for c in self._idle)
        started = time.perf_counter()
        try:
            answer = await super().post(url, body, headers, timeout_s)
        except Exception:
            RECORDS.append((opened, time.perf_counter() - started, -1))
            raise
        RECORDS.append((opened, time.perf_counter() - started, answer[0]))
        return answer


async def main_async(args: argparse.Namespace) -> None:
    server_env, cores = bg.cores_plan(True)
    stub, line = bg.spawn("--serve-stub", str(bg.free_port()), "50")
    bg.FUSE["votes"] = [{"judge": f"judge{i}", "choice": "A", "confidence": 0.85} for i in range(5)]
    gateway, base = ab.start_gateway(Path(args.tree).resolve(), line.split(" ", 1)[1], 5,
                                     tempfile.mkdtemp(prefix="probe-"), dict(server_env))
    try:
        await bg.wait_http(base + "/readyz", timeout=300)
        await bg.closed_loop(base + "/v1/fuse", 8, 1.0, bg.FUSE)
        RECORDS.clear()
        settings = " ".join(f"{k}={v}" for k, v in os.environ.items() if k.startswith("JUDGEFUSE_"))
        print(f"/v1/fuse open loop at {args.rate:g}/s for {args.seconds:g} s; {cores}; "
              f"settings: {settings or 'defaults'}")
        run = await bg.open_loop_run(base + "/v1/fuse", args.rate, args.seconds, bg.FUSE)
        print(bg.level_line("judgefuse /v1/fuse", "open", args.rate, run, 0.0))
        for opened, kind in ((False, "reused connection"), (True, "new connection")):
            ms = [s * 1e3 for o, s, status in RECORDS if o == opened and status == 200]
            if ms:
                print(f"    accepted on a {kind:<17}: {len(ms):5d}, latency p50 {bg.pct(ms, 50):7.1f}, "
                      f"p99 {bg.pct(ms, 99):7.1f}, max {max(ms):7.1f} ms")
    finally:
        ab.stop_all([gateway, stub])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1100.0)
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--tree", default=str(bg.REPO), help="the source tree to run (default: this one)")
    args = parser.parse_args()
    bg.LoadClient = ProbeClient  # type: ignore[misc,attr-defined]  # its open loop builds from it
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
