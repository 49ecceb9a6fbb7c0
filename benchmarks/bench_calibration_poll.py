"""A dashboard polling ``GET /v1/calibration``: what its disagreement list costs per poll.

Usage: ``python benchmarks/bench_calibration_poll.py [--storage sqlite|redis|postgres|URL]
[--verdicts 6000] [--polls 200]``

Seeds ``--verdicts`` stored verdicts of one panel, one in ten labelled (``bench_console.seed``:
600 labelled by default, more than the 500 the list reads), then polls
``/v1/calibration?window_hours=0&structure=false&population=false`` (all time: the seeded
verdicts are older than a day) through the app in process (no TCP), in interleaved rounds so
the three arms share the machine's minutes:

* ``off``: ``?disagreements=0`` (no list: what the rest of the route costs);
* ``re-read``: ``?disagreements=10`` with the list read from the 500 newest labelled verdicts on
  every poll (the route before the label-version cache: its max age set to 0);
* ``cached``: ``?disagreements=10`` as served (read again only after a label changed).

Prints p50 / p99 milliseconds per poll (wall and this process's CPU) per arm, and the machine's
load average. The figures are wall time: start it with the machine quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import httpx  # noqa: E402
from bench_console import PANEL, bench_app, seed  # noqa: E402
from bench_stores import WORDS, Store  # noqa: E402

from judgefuse.service.storage import storage_from_url  # noqa: E402

ARMS = {"off": 0, "re-read": 10, "cached": 10}


def line(name: str, times: list[tuple[float, float]]) -> str:
    def stats(values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        return f"p50 {statistics.median(ms):6.2f}  p99 {ms[min(len(ms) - 1, int(0.99 * len(ms)))]:6.2f} ms"

    return (f"{name:<8} polls {len(times):>4}  wall {stats([w for w, _ in times])}  "
            f"cpu {stats([c for _, c in times])}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--storage", default="sqlite", help=f"{' | '.join(WORDS)} | a URL")
    parser.add_argument("--verdicts", type=int, default=6000)
    parser.add_argument("--polls", type=int, default=200, help="polls per arm")
    args = parser.parse_args()

    workdir = tempfile.mkdtemp(prefix="bench-calibration-poll-")
    store = Store(args.storage, workdir)
    try:
        await store.start()
        storage = storage_from_url(store.url)
        await storage.open()
        took = await seed(storage, args.verdicts)
        labelled = await storage.count_labelled("default", PANEL)
        print(f"store {store.kind}: {args.verdicts:,} verdicts of one panel, {labelled} labelled A/B, "
              f"seeded in {took:.1f} s; {args.polls} polls per arm, interleaved")
        app = bench_app(store.url, storage, Path(workdir))
        gc.collect()
        gc.freeze()
        async with app.router.lifespan_context(app):
            lists = app.state.gateway.calibration.disagreement_lists
            served_max_age = lists.max_age_s
            times: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
            bodies: dict[str, object] = {}
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
                for _ in range(args.polls):
                    for arm, n in ARMS.items():
                        lists.max_age_s = 0.0 if arm == "re-read" else served_max_age
                        url = (f"/v1/calibration?panel={PANEL}&window_hours=0&structure=false"
                               f"&population=false&disagreements={n}")
                        started, cpu = time.perf_counter(), time.process_time()
                        response = await client.get(url)
                        times[arm].append((time.perf_counter() - started, time.process_time() - cpu))
                        if response.status_code != 200:
                            raise RuntimeError(f"{url}: {response.status_code} {response.text[:300]}")
                        bodies[arm] = response.json()["disagreements"]
            if bodies["re-read"] != bodies["cached"]:
                raise RuntimeError("the cached list differs from the one read afresh")
            missed = bodies["cached"]
            assert isinstance(missed, dict)
            print(f"disagreement list: {len(missed['items'])} items of {missed['scanned']} scanned "
                  "(identical in both arms)")
            for arm in ARMS:
                print(line(arm, times[arm]))
            load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
            print(f"load average {load}")
        await storage.close()
    finally:
        store.stop()


if __name__ == "__main__":
    asyncio.run(main())
