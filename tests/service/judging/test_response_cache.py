"""The gateway's shared response cache (``response_cache_url``): a second identical request is
answered from Redis without calling the judges, and a Redis outage never fails a verdict."""

from __future__ import annotations

import socket

from jf_test_support import app_support as S

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}


def _counting(script) -> list[str]:
    calls: list[str] = []
    script.by_question = lambda model, text: calls.append(model)  # count, then answer as fixed
    return calls


async def test_identical_requests_are_answered_from_the_shared_cache(stub, tmp_path, redis_url):
    server, script = stub
    calls = _counting(script)
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)], response_cache_url=redis_url)
    async with S.running_app(settings) as (_app, client):
        first = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
        n_first = len(calls)
        second = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
    assert first.status_code == second.status_code == 200 and n_first > 0
    assert len(calls) == n_first  # every judge answered from Redis
    assert first.json()["id"] != second.json()["id"]
    assert [v["choice"] for v in second.json()["votes"]] == [v["choice"] for v in first.json()["votes"]]


async def test_a_redis_outage_costs_cache_hits_not_verdicts(stub, tmp_path):
    server, script = stub
    calls = _counting(script)
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        dead = probe.getsockname()[1]
    settings = S.make_settings(
        tmp_path, [S.panel_yaml(tmp_path, server.url)], response_cache_url=f"redis://127.0.0.1:{dead}/0"
    )
    async with S.running_app(settings) as (_app, client):
        for _ in range(2):
            response = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
            assert response.status_code == 200 and response.json()["degraded"] is False
    assert len(calls) == 2 * len(S.JUDGES)  # no cache, every judge called each time
