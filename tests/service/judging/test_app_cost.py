"""Cost accounting through the app: a verdict's ``cost`` is the sum over its votes, /metrics
carries calls/tokens/USD per judge and per panel, and the dashboard shows them.

The stub returns known usage; ``openai/gpt-4o-mini`` through the direct backend at the stub is
priced from litellm's table (non-zero), the other judges' models are unknown there (0 USD)."""

from __future__ import annotations

import math
import re
import textwrap
from pathlib import Path

import pytest
from jf_test_support import app_support as S
from prometheus_client.parser import text_string_to_metric_families

from judgefuse.judges.transport.pricing import cost_usd

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
HEADERS = S.auth("tenant-a")
USAGE = {"gpt-4o-mini": (100, 20), "local-j": (50, 5), "mp-j": (30, 3)}


def cost_panel(tmp_path: Path, url: str) -> Path:
    common = (f"backend: direct\n    api_base: {url}\n    api_key_env: {S.PLANTED_ENV}\n"
              "    timeout_s: 3\n    retries: {attempts: 1, base_delay_s: 0, max_delay_s: 0}\n")
    text = textwrap.dedent("""\
        name: main
        fusion: majority
        quorum: 2
        judges:
          - name: cheap
            model: openai/gpt-4o-mini
            mode: sc
            {common}
          - name: local
            model: openai/local-j
            mode: sc
            {common}
          - name: sampler
            model: openai/mp-j
            mode: mp
            samples: 3
            use_n: false
            {common}
        """).replace("{common}\n", common)
    path = tmp_path / "panel-cost.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def scripted(server) -> None:
    def handler(body):
        model = body["model"]
        return S.stub_module.Reply(texts=S.sc_text("A", 90), usage=USAGE[model])

    server.handler = handler


def metric(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    raise AssertionError(f"{name}{labels} not in /metrics")


def price(model: str, n_calls: int = 1) -> float:
    prompt, completion = USAGE[model]
    return n_calls * cost_usd(f"openai/{model}", prompt, completion)


def test_the_priced_model_is_in_litellms_table():
    assert price("gpt-4o-mini") > 0
    assert price("local-j") == 0 and price("mp-j") == 0


async def test_response_cost_is_the_sum_over_votes(stub, tmp_path):
    server, _script = stub
    scripted(server)
    settings = S.make_settings(tmp_path, [cost_panel(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        r = await client.post("/v1/judge", json=PAIR, headers=HEADERS)
        assert r.status_code == 200, r.text
        body = r.json()
        votes = {v["judge"]: v for v in body["votes"]}
        assert votes["cheap"]["calls"] == 1 and votes["local"]["calls"] == 1
        assert votes["sampler"]["calls"] == 3  # one call per MP sample
        assert (votes["cheap"]["prompt_tokens"], votes["cheap"]["completion_tokens"]) == USAGE["gpt-4o-mini"]
        assert votes["sampler"]["prompt_tokens"] == 3 * USAGE["mp-j"][0]
        assert votes["cheap"]["cost_usd"] == pytest.approx(price("gpt-4o-mini"))
        assert votes["local"]["cost_usd"] == 0 and votes["sampler"]["cost_usd"] == 0
        cost = body["cost"]
        assert cost["calls"] == sum(v["calls"] for v in body["votes"]) == 5 == len(server.requests)
        assert cost["prompt_tokens"] == sum(v["prompt_tokens"] for v in body["votes"]) == 100 + 50 + 90
        assert cost["completion_tokens"] == sum(v["completion_tokens"] for v in body["votes"]) == 20 + 5 + 9
        assert cost["usd"] == pytest.approx(math.fsum(v["cost_usd"] for v in body["votes"]))
        assert cost["usd"] == pytest.approx(price("gpt-4o-mini")) and cost["usd"] > 0

        stored = (await client.get(f"/v1/verdicts/{body['id']}", headers=HEADERS)).json()
        assert stored["cost"] == cost

        batch = (await client.post("/v1/judge/batch", json={"items": [PAIR, PAIR]}, headers=HEADERS)).json()
        assert batch["n_ok"] == 2
        assert batch["cost"]["calls"] == 10
        assert batch["cost"]["usd"] == pytest.approx(sum(res["verdict"]["cost"]["usd"] for res in batch["results"]))


async def test_metrics_carry_cost_per_judge_and_per_panel(stub, tmp_path):
    server, _script = stub
    scripted(server)
    settings = S.make_settings(tmp_path, [cost_panel(tmp_path, server.url)])
    n = 4
    async with S.running_app(settings) as (_app, client):
        for _ in range(n):
            assert (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).status_code == 200
        text = (await client.get("/metrics", headers=S.admin())).text

    def judge(name: str, judge_name: str, **labels: str) -> float:
        return metric(text, name, panel="main", judge=judge_name, **labels)

    assert judge("judgefuse_judge_calls_total", "cheap") == n
    assert judge("judgefuse_judge_calls_total", "sampler") == 3 * n
    assert judge("judgefuse_judge_tokens_total", "cheap", kind="prompt") == 100 * n
    assert judge("judgefuse_judge_tokens_total", "cheap", kind="completion") == 20 * n
    assert judge("judgefuse_judge_tokens_total", "sampler", kind="prompt") == 90 * n
    assert judge("judgefuse_judge_cost_usd_total", "cheap") == pytest.approx(n * price("gpt-4o-mini"))
    assert judge("judgefuse_judge_cost_usd_total", "local") == 0
    panel = {"tenant": "tenant-a", "panel": "main"}
    assert metric(text, "judgefuse_verdict_cost_usd_count", **panel) == n
    assert metric(text, "judgefuse_verdict_cost_usd_sum", **panel) == pytest.approx(n * price("gpt-4o-mini"))
    assert metric(text, "judgefuse_verdict_calls_sum", **panel) == 5 * n
    assert metric(text, "judgefuse_verdict_calls_count", **panel) == n


async def test_quorum_lost_requests_still_count_their_calls(stub, tmp_path):
    server, _script = stub

    def handler(body):
        if body["model"] == "gpt-4o-mini":
            return S.stub_module.Reply(texts=S.sc_text("A", 90), usage=USAGE["gpt-4o-mini"])
        return S.stub_module.Status(500, "down")

    server.handler = handler
    settings = S.make_settings(tmp_path, [cost_panel(tmp_path, server.url)])
    async with S.running_app(settings) as (_app, client):
        assert (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).status_code == 503
        text = (await client.get("/metrics", headers=S.admin())).text
    assert metric(text, "judgefuse_judge_cost_usd_total", panel="main", judge="cheap") == pytest.approx(price("gpt-4o-mini"))
    assert metric(text, "judgefuse_judge_tokens_total", panel="main", judge="cheap", kind="prompt") == 100


async def test_dashboard_shows_cost_per_judge_and_per_panel(stub, tmp_path):
    server, _script = stub
    scripted(server)
    settings = S.make_settings(tmp_path, [cost_panel(tmp_path, server.url)])
    n = 3
    async with S.running_app(settings) as (_app, client):
        for _ in range(n):
            assert (await client.post("/v1/judge", json=PAIR, headers=HEADERS)).status_code == 200
        html = (await client.get("/console/calibration", headers=HEADERS)).text
        other = (await client.get("/console/calibration", headers=S.auth("tenant-b"))).text

    def row(page: str, judge: str) -> list[str]:
        match = re.search(rf'<tr data-judge="{judge}">(.*?)</tr>', page)
        assert match, f"no cost row for {judge}"
        return re.findall(r"<td>(.*?)</td>", match.group(1))

    cheap = row(html, "cheap")
    assert cheap[:6] == ["cheap", "openai/gpt-4o-mini", str(n), str(n), str(100 * n), str(20 * n)]
    assert cheap[6] == f"${n * price('gpt-4o-mini'):.6g}"
    sampler = row(html, "sampler")
    assert sampler[2:4] == [str(n), str(3 * n)] and sampler[6] == "$0"

    panel = re.search(r'<table class="panel-cost">.*?</tr>\s*<tr>(.*?)</tr>', html, re.S)
    assert panel
    cells = re.findall(r"<td>(.*?)</td>", panel.group(1))
    assert cells[:4] == [str(n), str(5 * n), str(240 * n), str(34 * n)]
    assert cells[4] == f"${n * price('gpt-4o-mini'):.6g}"
    assert cells[5] == f"${price('gpt-4o-mini'):.6g}" and cells[6] == "5.00"
    # per-panel cost is per tenant: tenant-b made no verdicts
    other_panel = re.search(r'<table class="panel-cost">.*?</tr>\s*<tr>(.*?)</tr>', other, re.S)
    assert other_panel and re.findall(r"<td>(.*?)</td>", other_panel.group(1))[:2] == ["0", "0"]
