"""``/metrics`` and the dashboard are protected once tenant keys exist: the metrics token
(``metrics_token``) reads every tenant's series and the cross-tenant dashboard; a tenant key
reads only its own series and figures; no key is a 401. Open mode stays open.

Found by an adversarial run: ``/metrics`` needed no key and named every tenant with its verdict
and label counts and calibration figures; the dashboard's judge tables summed every tenant.
"""

from __future__ import annotations

import hashlib
import re

import pytest
from jf_test_support import app_support as S

from judgefuse.service.settings import Settings

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
A, B = S.auth("tenant-a"), S.auth("tenant-b")


def tenants_named(text: str) -> set[str]:
    return set(re.findall(r'tenant="([^"]+)"', text))


@pytest.fixture
async def traffic(storage, stub, tmp_path):
    """Tenant A: 4 labelled verdicts; tenant B: 1 verdict; an app with keys and a metrics token."""
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)])
    async with S.running_app(settings, storage) as (app, client):
        for i in range(4):
            r = await client.post("/v1/judge", json={**PAIR, "label": "AB"[i % 2]}, headers=A)
            assert r.status_code == 200, r.text
        assert (await client.post("/v1/judge", json=PAIR, headers=B)).status_code == 200
        yield app, client


async def test_metrics_without_a_key_is_401(traffic):
    _app, client = traffic
    for headers in ({}, {"Authorization": "Bearer nope"}, {"X-API-Key": "nope"}):
        r = await client.get("/metrics", headers=headers)
        assert r.status_code == 401, r.text
        assert r.json()["fields"][0]["field"] == "header.authorization"
        assert "tenant-a" not in r.text


async def test_the_metrics_token_reads_every_tenant_and_every_series(traffic):
    _app, client = traffic
    r = await client.get("/metrics", headers=S.admin())
    assert r.status_code == 200
    assert tenants_named(r.text) == {"tenant-a", "tenant-b"}
    for series in ("judgefuse_judge_calls_total", "judgefuse_http_request_duration_seconds",
                   "judgefuse_calibration_ece", "judgefuse_labels_total"):
        assert series in r.text, series


async def test_a_tenant_key_reads_only_its_own_series(traffic):
    _app, client = traffic
    a = (await client.get("/metrics", headers=A)).text
    b = (await client.get("/metrics", headers=B)).text
    assert tenants_named(a) == {"tenant-a"} and tenants_named(b) == {"tenant-b"}
    assert 'judgefuse_labels_total{panel="main",status="labelled",tenant="tenant-a"} 4.0' in a
    assert "judgefuse_calibration_labels" in a and "judgefuse_labels_total" not in b
    for text in (a, b):  # series summed over every tenant are the operator's only
        for series in ("judgefuse_judge_calls_total", "judgefuse_http_request_duration_seconds",
                       "judgefuse_gateway_overhead_seconds"):
            assert series not in text, series
        assert "key-for-tenant" not in text and S.METRICS_TOKEN not in text


async def test_the_metrics_token_is_not_a_tenant_key(traffic):
    _app, client = traffic
    r = await client.post("/v1/judge", json=PAIR, headers=S.admin())
    assert r.status_code == 401 and r.json()["fields"][0]["problem"] == "not a tenant key"


def _cells(page: str, judge: str, table: str) -> list[str]:
    match = re.search(rf'<table class="{table}">.*?</table>', page, re.S)
    assert match, table
    row = re.search(rf"<tr(?: data-judge=\"{judge}\")?><td>{judge}</td>(.*?)</tr>", match.group(0))
    assert row, (table, judge)
    return re.findall(r"<td>(.*?)</td>", row.group(1))


async def test_the_dashboard_shows_a_tenant_its_own_judge_figures_and_the_operator_all(traffic):
    _app, client = traffic
    a = (await client.get("/console/calibration", headers=A)).text
    b = (await client.get("/console/calibration", headers=B)).text
    admin = await client.get("/console/calibration", headers=S.admin())
    assert admin.status_code == 200
    # judge health: 4 valid votes of j1 for A, 1 for B; 5 for the operator
    assert _cells(a, "j1", "health")[:2] == ["4", "0"]
    assert _cells(b, "j1", "health")[:2] == ["1", "0"]
    assert _cells(a, "j1", "judge-cost")[1:3] == ["4", "4"]  # model, votes, calls
    assert _cells(b, "j1", "judge-cost")[1:3] == ["1", "1"]
    assert _cells(admin.text, "j1", "judges")[1:3] == ["5", "0"]
    assert "tenant-a" not in b and "tenant-b" not in a
    tenants = dict(re.findall(r'<tr data-tenant="([^"]+)"><td>[^<]*</td><td>(\d+)</td>', admin.text))
    assert tenants == {"tenant-a": "4", "tenant-b": "1"}
    assert (await client.get("/console/calibration")).status_code == 401


async def test_open_mode_metrics_stay_open_unless_a_token_is_configured(stub, tmp_path):
    server, _script = stub
    panel = S.panel_yaml(tmp_path, server.url)
    open_settings = S.make_settings(tmp_path, [panel], api_keys={}, metrics_token=None)
    async with S.running_app(open_settings) as (_app, client):
        assert (await client.post("/v1/judge", json=PAIR)).status_code == 200
        r = await client.get("/metrics")
        assert r.status_code == 200 and "judgefuse_judge_calls_total" in r.text
        assert "judgefuse_judge_calls_total" not in (await client.get("/console/calibration")).text  # HTML, fine
        assert _cells((await client.get("/console/calibration")).text, "j1", "health")[:1] == ["1"]
    token = hashlib.sha256(S.METRICS_TOKEN.encode()).hexdigest()
    guarded = S.make_settings(tmp_path, [panel], api_keys={}, metrics_token=token)
    async with S.running_app(guarded) as (_app, client):
        assert (await client.get("/metrics")).status_code == 401
        assert (await client.get("/metrics", headers=S.admin())).status_code == 200
        assert (await client.get("/console/calibration")).status_code == 200  # tenant "default"


def test_metrics_token_must_be_a_digest_and_no_tenant_key():
    with pytest.raises(ValueError, match="SHA-256"):
        Settings(metrics_token="plain-token")
    digest = hashlib.sha256(b"k").hexdigest()
    with pytest.raises(ValueError, match="differ from every tenant"):
        Settings(metrics_token=digest, api_keys={"t": digest})
    assert Settings(metrics_token=digest.upper()).web.metrics_token == digest
