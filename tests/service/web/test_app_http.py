"""Over real HTTP (uvicorn on a loopback port): /metrics series, the dashboard (and in headless
chromium when installed), and a planted provider key that must appear nowhere."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import httpx
import pytest
from jf_test_support import app_support as S
from jf_test_support import browser

from judgefuse.service.app import create_app

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
CHROMIUM = "/usr/bin/chromium"

EXPECTED_SERIES = [
    "judgefuse_http_request_duration_seconds_bucket",
    'judgefuse_judge_latency_seconds_count{judge="j1",panel="main"}',
    'judgefuse_judge_errors_total{judge="j3",panel="main"}',
    'judgefuse_judge_votes_total{judge="j1",outcome="valid",panel="main"}',
    'judgefuse_verdicts_total{method="majority",panel="main",route="human_review",tenant="tenant-a"}',
    'judgefuse_verdicts_total{method="majority",panel="main",route="auto_accept",tenant="tenant-a"}',
    'judgefuse_quorum_lost_total{panel="main"}',
    "judgefuse_gateway_overhead_seconds_bucket",
    'judgefuse_labels_total{panel="main",status="labelled",tenant="tenant-a"}',
    'judgefuse_calibration_ece{key="method:majority:fused",panel="main",tenant="tenant-a"}',
    'judgefuse_calibration_th_score{key="judge:j1:sc",panel="main",tenant="tenant-a"}',
    'judgefuse_calibration_labels{key="mode:all:sc",panel="main",tenant="tenant-a"}',
]


async def test_real_http_flow_metrics_and_no_planted_key_anywhere(stub, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)
    server, script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", min_labels_for_refit=10)
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    bodies: list[str] = []
    headers = S.auth("tenant-a")
    async with S.uvicorn_server(app) as url, httpx.AsyncClient(base_url=url, timeout=30) as client:

        async def call(method: str, path: str, **kwargs) -> httpx.Response:
            r = await client.request(method, path, **kwargs)
            bodies.append(r.text)
            return r

        for j in S.JUDGES:
            script.set(j, "A", 95)
        for _ in range(35):
            r = await call("POST", "/v1/judge", json={**PAIR, "label": "A"}, headers=headers)
            assert r.status_code == 200, r.text
        tuned = await call("POST", "/v1/thresholds/tune", json={"target_precision": 0.8, "min_count": 30},
                           headers=headers)
        assert tuned.json()["stored"] is True
        accepted = await call("POST", "/v1/judge", json=PAIR, headers=headers)
        assert accepted.json()["route"] == "auto_accept"
        await call("POST", "/v1/fusion/refit", json={}, headers=headers)

        script.set("j3", action=S.stub_module.Status(500, "boom"))
        degraded = await call("POST", "/v1/judge", json=PAIR, headers=headers)
        assert degraded.json()["degraded"] is True

        # the provider refuses our key and echoes it back (careless providers do): the key must
        # still appear nowhere, neither in the 503 reasons nor in logs
        server.require_key = "sk-some-other-key"
        lost = await call("POST", "/v1/judge", json=PAIR, headers=headers)
        assert lost.status_code == 503
        server.require_key = S.PLANTED

        vid = accepted.json()["id"]
        for path in (f"/v1/verdicts/{vid}", "/v1/calibration", "/v1/thresholds", "/v1/fusion/models",
                     "/console/calibration", "/readyz", "/healthz"):
            r = await call("GET", path, headers=headers)
            assert r.status_code == 200, (path, r.text)
        metrics = await call("GET", "/metrics", headers=S.admin())
        assert metrics.status_code == 200
        assert metrics.headers["content-type"].startswith("text/plain")
        for series in EXPECTED_SERIES:
            assert series in metrics.text, series
        openapi = await call("GET", "/openapi.json")
        assert openapi.status_code == 200

    assert server.requests and all(
        r.headers.get("Authorization") == f"Bearer {S.PLANTED}" for r in server.requests
    )  # the key really was in use
    captured = capfd.readouterr()
    everything = "\n".join([*bodies, caplog.text, captured.out, captured.err])
    assert S.PLANTED not in everything
    assert "PLANTED" not in everything
    for key in S.TENANT_KEYS.values():
        assert key not in everything


async def test_dashboard_renders_diagrams_and_escapes_names(stub, tmp_path):
    server, script = stub
    panel = S.panel_yaml(tmp_path, server.url, judges=("j1", "j2", "j<b>3"), quorum=2)
    settings = S.make_settings(tmp_path, [panel], storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}")
    headers = S.auth("tenant-a")
    async with S.running_app(settings) as (_app, client):
        for _ in range(3):
            await client.post("/v1/judge", json={**PAIR, "label": "A"}, headers=headers)
        page = await client.get("/console/calibration", headers=headers)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert html.count("<svg") >= 4
    assert "method:majority:fused" in html and "judge:j1:sc" in html
    assert "j<b>3" not in html and "j&lt;b&gt;3" in html
    assert "key-for-tenant" not in html and S.PLANTED not in html


@pytest.mark.skipif(not Path(CHROMIUM).exists(),
                    reason=f"{CHROMIUM} not installed (apt-get install -y chromium): browser test skipped")
async def test_dashboard_in_headless_chromium(stub, tmp_path):
    server, script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", api_keys={})
    app = create_app(settings, environ={S.PLANTED_ENV: S.PLANTED})
    async with S.uvicorn_server(app) as url:
        async with httpx.AsyncClient(base_url=url) as client:
            for label in ("A", "A", "B"):
                assert (await client.post("/v1/judge", json={**PAIR, "label": label})).status_code == 200
        profile = tmp_path / "chromium-profile"
        proc = await asyncio.create_subprocess_exec(
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run",
            f"--user-data-dir={profile}", "--dump-dom", f"{url}/console/calibration",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=browser.WAIT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
    dom = out.decode("utf-8", "replace")
    assert proc.returncode == 0, err.decode()[-2000:]
    assert dom.count("<svg") >= 4, dom[:2000]
    assert 'class="bin"' in dom
    for key in ("method:majority:fused", "judge:j1:sc", "judge:j2:sc", "mode:all:sc"):
        assert key in dom
    assert "tenant default" in dom
    shutil.rmtree(profile, ignore_errors=True)
