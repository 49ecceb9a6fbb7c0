"""The dashboard's "over time" section: TH-Score and ECE per UTC day for each fusion method,
read from the hour buckets, agreeing with the all-time numbers when every label is today's."""

from __future__ import annotations

import re
import time

from jf_test_support import app_support as S


async def test_dashboard_shows_ece_and_th_per_day_for_the_fused_verdicts(stub, tmp_path):
    server, script = stub
    # j1 and j2 say A (90), j3 says B (60): majority A at 2/3; labels make 3 right, 1 wrong.
    script.set("j1", "A", 90)
    script.set("j2", "A", 90)
    script.set("j3", "B", 60)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        for index, label in enumerate("AAAB"):
            pair = {"question": f"q{index}?", "answer_a": "x", "answer_b": "y", "label": label}
            assert (await client.post("/v1/judge", json=pair, headers=headers)).status_code == 200
        calibration = (await client.get("/v1/calibration", headers=headers)).json()
        html = (await client.get("/console/calibration", headers=headers)).text
        other = (await client.get("/console/calibration", headers=S.auth("tenant-b"))).text
    fused = next(k for k in calibration["keys"] if k["kind"] == "method")
    section = re.search(rf'<div class="history" data-key="{re.escape(fused["key"])}">(.*?)</div>', html, re.S)
    assert section, "no history section for the fused method"
    rows = re.findall(r"<tr><td>(\d{4}-\d{2}-\d{2})</td><td>(\d+)</td><td>(.*?)</td><td>(.*?)</td></tr>", section.group(1))
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert [(day, n) for day, n, _ece, _th in rows] == [(today, "4")]  # only days with labels
    all_time = fused["all_time"]
    assert all_time["n"] == 4
    assert rows[0][2] == f"{all_time['ece']:.3f}" and rows[0][3] == f"{all_time['th_score']:.2f}"
    assert "<polyline" in section.group(1)
    assert 'class="history"' not in other  # tenant-b has no labels, so no history
