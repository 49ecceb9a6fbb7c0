"""The console's screenshots in docs/images/ (docs/console.md): the overview, the calibration
page, the verdict list and a verdict page at 1400 and 800 px wide, in headless Debian Chromium.

Usage: ``.venv/bin/python scripts/console_screenshots.py [--out docs/images]``

A throwaway SQLite store in open mode holds one panel's last 18 hours: 600 verdicts of three
external judges (``benchmarks/bench_console.py``'s records, stored with the ledger's traffic
counters), a tuned threshold, and labels posted through ``POST /v1/feedback`` (so the monitor
and the estimates see them as they would in production): four in five audit items and one in
four review items; then one refit (the learning section's log).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for folder in ("benchmarks", "tests"):
    sys.path.insert(0, str(REPO / folder))

import bench_console  # noqa: E402
import httpx  # noqa: E402
from jf_test_support import app_support, browser  # noqa: E402  (the uvicorn helper the tests use)

from judgefuse.service.app import create_app  # noqa: E402
from judgefuse.service.ledger import traffic_increments  # noqa: E402
from judgefuse.service.settings import Settings  # noqa: E402
from judgefuse.service.storage import SQLiteStorage, ThresholdRecord  # noqa: E402

PANEL = "main"
PAGES = [("console-overview", "/console"), ("console-calibration", "/console/calibration"),
         ("console-verdicts", f"/console/verdicts?panel={PANEL}&limit=25"), ("console-verdict", None)]


async def seed(storage: SQLiteStorage, now: float) -> list[str]:
    await storage.put_threshold("default", PANEL, ThresholdRecord(
        panel=PANEL, threshold=0.9, created_at=now - 20 * 3600, method="majority",
        target_precision=0.9, delta=0.1, coverage=0.62, n_labels=400))
    rng = random.Random(4)
    ids = []
    for i in range(600):
        record = bench_console.record(i, rng, panel=PANEL, created_at=now - 18 * 3600 + i * 107.0)
        record = record.model_copy(update={"threshold_version": 1})
        assert record.review is not None
        await storage.save_verdict("default", record, traffic_increments(PANEL, "majority", record.review))
        ids.append(record.id)
    return ids


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "images")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="console-shots-"))
    panel = workdir / "panel.yaml"
    panel.write_text(textwrap.dedent(f"""\
        name: {PANEL}
        fusion: majority
        quorum: 2
        audit_rate: 0.05
        judges:
        """) + "".join(f"  - {{name: {j}, external: true}}\n" for j in bench_console.JUDGES),
        encoding="utf-8")
    storage = SQLiteStorage(workdir / "console.sqlite3")
    await storage.open()
    settings = Settings(storage_url=f"sqlite:///{workdir / 'console.sqlite3'}", panels=[panel],
                        refit_every_labels=0)
    now = time.time()
    ids = await seed(storage, now)
    app = create_app(settings, storage=storage, environ={})
    async with app_support.uvicorn_server(app) as base:
        rng = random.Random(9)
        shown = None
        async with httpx.AsyncClient(base_url=base) as client:
            for vid in ids:
                record = await storage.get_verdict("default", vid)
                assert record is not None and record.review is not None
                share = {"audit": 0.8, "review": 0.25}.get(record.review.stratum, 0.0)
                if rng.random() < share:
                    label = record.verdict.choice if rng.random() < 0.85 else ("B" if record.verdict.choice == "A" else "A")
                    response = await client.post("/v1/feedback", json={"verdict_id": vid, "label": label})
                    response.raise_for_status()
                    votes = {v.choice for v in record.verdict.votes}
                    if shown is None and len(votes) > 1 and record.review.stratum == "review":
                        shown = vid
            # one refit, so the overview's learning section lists an outcome and its reason
            (await client.post("/v1/fusion/refit", json={"panel": PANEL}, timeout=300)).raise_for_status()

        def shoot() -> None:
            with browser.chromium(1400, 900) as driver:
                for name, path in PAGES:
                    for width in (1400, 800):
                        driver.get(base + (path or f"/console/verdicts/{shown}"))
                        browser.full_page_png(driver, args.out / f"{name}-{width}.png", width)
                        print(args.out / f"{name}-{width}.png")

        await asyncio.to_thread(shoot)
    await storage.close()


if __name__ == "__main__":
    asyncio.run(main())
