"""The console shows a certified threshold's margin (lower bound minus target) beside the
simulated miss count of certificates of that margin (issue 44, item 3): the threshold tuned over
the API, the page's margin and lower bound equal to the tune's report, and the miss count the
one benchmarks/results/certificate_margin.txt committed for that band."""

from __future__ import annotations

import html as html_lib
import re
from pathlib import Path

from jf_test_support import app_support as S
from jf_test_support import panel_support as P

from judgefuse.calibration.thresholds import MARGIN_MISSES, margin_misses
from judgefuse.service.storage import SQLiteStorage, ThresholdRecord

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "certificate_margin.txt"


def _certificate(page: str) -> str:
    found = re.search(
        r'<span class="certificate" data-figure="margin">(.*?)\(bench_certificate_margin\)</span>', page, re.S
    )
    assert found, "no certificate margin beside the threshold"
    return html_lib.unescape(re.sub(r"<[^>]+>", "", found.group(1)))


def test_the_miss_counts_are_the_committed_benchmarks() -> None:
    text = RESULTS.read_text(encoding="utf-8")
    rows = {
        (float(lo), float(hi)): (int(n), int(k))
        for lo, hi, n, k in re.findall(r"\[(\d\.\d\d), (\d\.\d\d)\)\s+(\d+)\s+(\d+)\s+\d\.\d+", text)
    }
    assert (MARGIN_MISSES[0].certified, MARGIN_MISSES[0].missed) == rows[(0.0, 0.01)]
    assert (MARGIN_MISSES[1].certified, MARGIN_MISSES[1].missed) == rows[(0.01, 0.02)]
    above = [v for (lo, _hi), v in rows.items() if lo >= 0.02]
    assert (MARGIN_MISSES[2].certified, MARGIN_MISSES[2].missed) == tuple(map(sum, zip(*above, strict=True)))


async def test_the_overview_shows_the_tuned_thresholds_margin(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "db.sqlite3")
    await storage.open()
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path, audit_rate=0.0)])
    try:
        async with S.running_app(settings, storage=storage) as (_app, client):
            for i in range(160):  # no threshold yet: every verdict goes to review
                ballot = P.UNANIMOUS if i % 4 else P.SPLIT
                r = await client.post("/v1/fuse", json={**P.PAIR, "id": f"m{i}", "votes": ballot}, headers=P.H)
                assert r.status_code == 200, r.text
                label = "B" if (i % 4 and i % 20 == 1) or (not i % 4 and i % 8 == 0) else "A"
                r = await client.post("/v1/feedback", json={"verdict_id": f"m{i}", "label": label}, headers=P.H)
                assert r.status_code == 200, r.text
            before = (await client.get("/console", headers=P.H)).text
            tuned = (
                await client.post(
                    "/v1/thresholds/tune", json={"panel": "ext", "target_precision": 0.85, "delta": 0.1}, headers=P.H
                )
            ).json()
            page = (await client.get("/console", headers=P.H)).text
            # a threshold stored without a tune's report (set by hand) shows no certificate
            await storage.put_threshold(
                "tenant-a",
                "ext",
                ThresholdRecord(panel="ext", threshold=0.95, created_at=2.0, method="majority", target_precision=0.9),
            )
            by_hand = (await client.get("/console", headers=P.H)).text
            # a report stored before the margin was: the margin from its bound and target, thin
            await storage.put_threshold(
                "tenant-a",
                "ext",
                ThresholdRecord(
                    panel="ext",
                    threshold=0.97,
                    created_at=3.0,
                    method="majority",
                    target_precision=0.9,
                    details={"report": {"lower_bound": 0.906, "target": 0.9}},
                ),
            )
            older = (await client.get("/console", headers=P.H)).text
    finally:
        await storage.close()
    assert 'data-figure="margin"' not in before  # no threshold, no certificate
    report = tuned["report"]
    assert tuned["stored"] and tuned["threshold"] is not None and report["margin"] > 0, tuned
    shown = _certificate(page)
    assert f"certificate margin {100 * report['margin']:+.2f} points" in shown
    assert f"lower bound {report['lower_bound']:.3f}" in shown
    band = margin_misses(report["margin"])
    assert band is not None and band.describe() in shown
    assert ("thin" in shown.split(":")[0]) == (report["margin"] < 0.01)
    assert 'data-figure="margin"' not in by_hand
    thin = _certificate(older)
    assert "certificate margin +0.60 points (lower bound 0.906) thin:" in thin
    assert "with a margin under 1 point missed their target in 17 of 1,730 simulated tunes (1.0%)" in thin
