"""The console's overview shows the API's numbers: on a seeded store (verdicts of every route
through /v1/fuse, review and audit labels), every figure on the page equals what
``GET /v1/calibration``, ``GET /v1/review/stats`` and ``GET /v1/monitor`` answer for the same
window. And who may see what: a tenant sees its own, the operator token the overviews only,
annotator credentials and strangers nothing."""

from __future__ import annotations

import html as html_lib
import re

from jf_test_support import app_support as S
from jf_test_support import console_support as C
from jf_test_support import panel_support as P


def _figure(page: str, tenant: str, panel: str, name: str) -> str:
    section = re.search(rf'<section class="panel" id="panel-{tenant}-{panel}".*?</section>', page, re.S)
    assert section, f"no section for {tenant}/{panel}"
    found = re.search(rf'class="{name}">([^<]*)<', section.group(0))
    assert found, f"no {name} in the section"
    return html_lib.unescape(found.group(1)).strip()


def _stratum_cells(page: str, stratum: str) -> dict[str, int]:
    row = re.search(rf'<tr data-stratum="{stratum}">(.*?)</tr>', page, re.S)
    assert row, stratum
    return {k: int(v) for k, v in re.findall(r'<td class="(\w+)">(\d+)</td>', row.group(1))}


async def test_every_overview_number_equals_the_apis(storage, tmp_path):
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path, audit_rate=0.5)])
    async with S.running_app(settings, storage=storage) as (_app, client):
        seeded = await C.seed(client, storage, n=48)
        page = (await client.get("/console", headers=C.H)).text
        calibration = (await client.get("/v1/calibration?panel=ext&window_hours=24", headers=C.H)).json()
        stats = (await client.get("/v1/review/stats?panel=ext", headers=C.H)).json()
        monitor = (await client.get("/v1/monitor?panel=ext", headers=C.H)).json()
    fused = next(k for k in calibration["keys"] if k["key"] == "method:majority:fused")
    precision = fused["population"]["auto_accept_precision"]
    assert precision is not None and precision["estimate"] is not None  # audit labels exist
    fig = lambda name: _figure(page, "tenant-a", "ext", name)  # noqa: E731
    assert fig("estimate") == f"{precision['estimate']:.3f}"
    assert fig("lower") == f"{precision['lower']:.3f}"
    assert fig("upper") == f"{precision['upper']:.3f}"
    assisted = fused["population"]["model_assisted"]["auto_accept_precision"]
    line = re.search(r'data-figure="precision-assisted">(.*?)</div>', page, re.S)
    assert line, "no model-assisted precision beside the labels-only one"
    for part in ("estimate", "lower", "upper"):
        assert f'class="{part}">{assisted[part]:.3f}<' in line.group(1), part
    assert int(fig("labels")) == fused["population"]["n_labels"]
    assert int(fig("depth")) == stats["queue_depth"]
    assert int(fig("leased")) == stats["leased"]
    for name, counts in stats["strata"].items():
        cells = _stratum_cells(page, name)
        assert cells == {k: counts[k] for k in ("routed", "queued", "leased", "labelled")}, name
    assert fig("state") == monitor["state"]
    assert stats["queue_depth"] > 0 and fig("queue-age") == "0 min"  # seeded just now
    # routing: every verdict of the window, split as the strata were routed
    auto = int(fig("auto-n"))
    review = int(fig("review-n"))
    assert auto + review == len(seeded) == fused["population"]["window_verdicts"]
    assert review == stats["strata"]["review"]["routed"]
    assert auto == stats["strata"]["audit"]["routed"] + stats["strata"]["none"]["routed"]
    assert auto == sum(1 for v in seeded if v["route"] == "auto_accept") > 0
    assert 'data-judge="e1"' in page and "No threshold tuned" not in page


async def test_empty_console_says_what_to_do_next(storage, tmp_path):
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path)])
    async with S.running_app(settings, storage=storage) as (_app, client):
        page = (await client.get("/console", headers=C.H)).text
        listing = (await client.get("/console/verdicts?panel=ext", headers=C.H)).text
    assert "No threshold tuned: everything goes to review" in page
    assert "No verdicts in the last 24 hours" in page
    assert 'href="/review?panel=ext"' in page and 'href="/docs"' in page
    assert "No verdicts stored for panel ext yet" in listing


async def test_who_sees_what(storage, tmp_path):
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path, audit_rate=0.5)])
    async with S.running_app(settings, storage=storage) as (_app, client):
        seeded = await C.seed(client, storage, n=8)
        vid = seeded[0]["id"]
        own = await client.get(f"/console/verdicts/{vid}", headers=C.H)
        other = await client.get(f"/console/verdicts/{vid}", headers=S.auth("tenant-b"))
        other_list = (await client.get("/console/verdicts?panel=ext", headers=S.auth("tenant-b"))).text
        operator = await client.get("/console", headers=S.admin())
        operator_list = await client.get("/console/verdicts?panel=ext", headers=S.admin())
        nobody = await client.get("/console")
        stranger = await client.get("/console", headers={"Authorization": "Bearer nope"})
    assert own.status_code == 200 and "Question 0: which is right?" in own.text
    assert "default-src 'none'" in own.headers["content-security-policy"]
    assert other.status_code == 404 and "c000" not in other_list
    assert operator.status_code == 200
    assert 'id="panel-tenant-a-ext"' in operator.text and 'id="panel-tenant-b-ext"' in operator.text
    assert "Question 0" not in operator.text  # overview figures only, no verdict
    assert operator_list.status_code == 404
    assert nobody.status_code == 401 and stranger.status_code == 401


async def test_verdict_page_shows_every_vote_the_route_and_the_label(storage, tmp_path):
    settings = S.make_settings(tmp_path, [P.external_panel(tmp_path, audit_rate=0.5)])
    async with S.running_app(settings, storage=storage) as (_app, client):
        seeded = await C.seed(client, storage, n=8)
        labelled = next(v for v in seeded if "given" in v)
        stored = (await client.get(f"/v1/verdicts/{labelled['id']}", headers=C.H)).json()
        page = (await client.get(f"/console/verdicts/{labelled['id']}", headers=C.H)).text
        evil = {**P.PAIR, "id": "xss", "question": "<script>alert(1)</script>", "votes": P.SPLIT}
        assert (await client.post("/v1/fuse", json=evil, headers=C.H)).status_code == 200
        escaped = (await client.get("/console/verdicts/xss", headers=C.H)).text
    for judge in P.EXT:
        assert f'<tr data-judge="{judge}">' in page
    assert f'class="choice">{stored["choice"]}<' in page
    assert f'class="confidence">{stored["confidence"]:.3f}<' in page
    assert f'class="label">{labelled["given"]}<' in page
    assert 'class="threshold-version">1<' in page
    assert "<script>alert(1)</script>" not in escaped and "&lt;script&gt;alert(1)&lt;/script&gt;" in escaped
