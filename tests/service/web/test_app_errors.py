"""Auth (401), quorum degradation (200 degraded / 503), size limits (413/422 naming the field)."""

from __future__ import annotations

import pytest
from jf_test_support import app_support as S

from judgefuse.service.settings import Settings, SettingsError, load_settings

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}


@pytest.fixture
async def app_client(stub, tmp_path):
    server, script = stub
    settings = S.make_settings(
        tmp_path, [S.panel_yaml(tmp_path, server.url)],
        storage_url=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        max_body_bytes=4096, max_text_chars=200, max_batch_items=3,
    )
    async with S.running_app(settings) as (app, client):
        yield client, script


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer wrong-key"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"X-API-Key": "wrong-key"},
])
async def test_missing_or_invalid_api_key_is_401_json(app_client, headers):
    client, _ = app_client
    r = await client.post("/v1/judge", json=PAIR, headers=headers)
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    body = r.json()
    assert body["error"] and body["fields"][0]["field"] == "header.authorization"
    for path in ("/v1/calibration", "/v1/thresholds", "/v1/verdicts/x", "/console/calibration"):
        assert (await client.get(path, headers=headers)).status_code == 401


async def test_x_api_key_header_authenticates(app_client):
    client, _ = app_client
    r = await client.post("/v1/judge", json=PAIR, headers={"X-API-Key": S.TENANT_KEYS["tenant-b"]})
    assert r.status_code == 200


async def test_one_failed_judge_above_quorum_gives_degraded_200_naming_it(app_client):
    client, script = app_client
    script.set("j3", action=S.stub_module.Status(500, "upstream exploded"))
    r = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["degraded"] is True
    assert [f["judge"] for f in body["failed_judges"]] == ["j3"]
    assert "500" in body["failed_judges"][0]["reason"]
    assert body["n_valid"] == 2 and body["choice"] == "A"


async def test_quorum_lost_is_503_with_each_judges_reason(app_client):
    client, script = app_client
    script.set("j2", action=S.stub_module.Status(500, "upstream exploded"))
    script.set("j3", action=S.stub_module.Garbage())
    r = await client.post("/v1/judge", json=PAIR, headers=S.auth("tenant-a"))
    assert r.status_code == 503
    body = r.json()
    assert "quorum" in body["error"] and body["quorum"] == 2 and body["valid_votes"] == 1
    reasons = {f["judge"]: f["reason"] for f in body["failed_judges"]}
    assert set(reasons) == {"j2", "j3"} and "500" in reasons["j2"]


async def test_body_over_the_limit_is_413(app_client):
    client, _ = app_client
    big = {**PAIR, "answer_a": "x" * 5000}
    r = await client.post("/v1/judge", json=big, headers=S.auth("tenant-a"))
    assert r.status_code == 413
    assert r.json()["fields"][0]["field"] == "body"


async def test_chunked_body_over_the_limit_is_413(app_client):
    client, _ = app_client

    async def chunks():
        yield b'{"question": "q", "answer_a": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'", "answer_b": "b"}'

    r = await client.post("/v1/judge", content=chunks(),
                          headers={**S.auth("tenant-a"), "Content-Type": "application/json"})
    assert r.status_code == 413


async def test_field_over_its_limit_is_422_naming_it(app_client):
    client, _ = app_client
    r = await client.post("/v1/judge", json={**PAIR, "answer_b": "y" * 300}, headers=S.auth("tenant-a"))
    assert r.status_code == 422
    assert r.json()["fields"] == [{"field": "body.answer_b", "problem": "too long: 300 characters, at most 200"}]


@pytest.mark.parametrize(("body", "field"), [
    ({"answer_a": "4", "answer_b": "5"}, "body.question"),
    ({**PAIR, "label": "C"}, "body.label"),
    ({**PAIR, "surprise": 1}, "body.surprise"),
    ({**PAIR, "panel": "nope"}, "body.panel"),
    ({**PAIR, "method": "nope"}, "body.method"),
    ({**PAIR, "method": "stacked"}, "body.method"),
])
async def test_bad_fields_are_422_naming_the_field(app_client, body, field):
    client, _ = app_client
    r = await client.post("/v1/judge", json=body, headers=S.auth("tenant-a"))
    assert r.status_code == 422, r.text
    assert r.json()["fields"][0]["field"] == field
    assert r.json()["error"].startswith("invalid request")


async def test_invalid_json_is_422(app_client):
    client, _ = app_client
    r = await client.post("/v1/judge", content=b"{nope", headers={**S.auth("tenant-a"), "Content-Type": "application/json"})
    assert r.status_code == 422
    assert r.json()["fields"][0]["problem"] == "the body is not valid JSON"


async def test_batch_beyond_the_limit_is_413_naming_items(app_client):
    client, _ = app_client
    r = await client.post("/v1/judge/batch", json={"items": [PAIR] * 4}, headers=S.auth("tenant-a"))
    assert r.status_code == 413
    assert r.json()["fields"][0]["field"] == "body.items"


async def test_batch_judges_each_item_and_names_bad_items(app_client):
    client, _ = app_client
    ok = await client.post("/v1/judge/batch", json={"items": [PAIR, {**PAIR, "label": "B"}]}, headers=S.auth("tenant-a"))
    assert ok.status_code == 200
    body = ok.json()
    assert body["n_ok"] == 2 and [r["status"] for r in body["results"]] == [200, 200]
    assert body["results"][1]["verdict"]["feedback"]["status"] == "labelled"
    bad = await client.post("/v1/judge/batch", json={"items": [PAIR, {**PAIR, "answer_a": "z" * 300}]},
                            headers=S.auth("tenant-a"))
    # a bad item is that item's 422, never the batch's: the good item is judged
    assert bad.status_code == 200, bad.text
    results = bad.json()["results"]
    assert [r["status"] for r in results] == [200, 422]
    assert results[1]["error"]["fields"][0]["field"] == "body.items[1].answer_a"


async def test_reused_id_for_another_item_is_409(app_client):
    client, _ = app_client
    first = await client.post("/v1/judge", json={**PAIR, "id": "fixed-1"}, headers=S.auth("tenant-a"))
    assert first.status_code == 200
    changed = {**PAIR, "id": "fixed-1", "answer_b": PAIR["answer_b"] + " (edited)"}
    again = await client.post("/v1/judge", json=changed, headers=S.auth("tenant-a"))
    assert again.status_code == 409 and again.json()["fields"][0]["field"] == "body.id"
    other = await client.post("/v1/judge", json={**PAIR, "id": "fixed-1"}, headers=S.auth("tenant-b"))
    assert other.status_code == 200  # ids are per tenant


async def test_a_retried_request_gets_the_stored_verdict_and_calls_no_judge(app_client):
    """A client that lost the reply (timeout, gateway crash after the save) retries safely."""
    client, script = app_client
    judge_calls: list[str] = []
    script.by_question = lambda model, text: judge_calls.append(model)  # count, answer as fixed
    first = await client.post("/v1/judge", json={**PAIR, "id": "retry-1"}, headers=S.auth("tenant-a"))
    assert first.status_code == 200 and judge_calls
    calls = len(judge_calls)
    again = await client.post("/v1/judge", json={**PAIR, "id": "retry-1", "label": "A"}, headers=S.auth("tenant-a"))
    assert again.status_code == 200 and len(judge_calls) == calls
    assert again.json()["id"] == "retry-1" and again.json()["choice"] == first.json()["choice"]
    stored = await client.get("/v1/verdicts/retry-1", headers=S.auth("tenant-a"))
    assert stored.json()["label"] == "A"  # the retry's inline label was applied


async def test_unknown_endpoint_is_json_404(app_client):
    client, _ = app_client
    r = await client.get("/v1/nothing-here")
    assert r.status_code == 404 and "no such endpoint" in r.json()["error"]


async def test_health_and_readiness(app_client):
    client, _ = app_client
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["panels"] == {"main": True}


# ------------------------------------------------------------------------ settings


def test_settings_refuse_a_plain_key_without_echoing_it():
    with pytest.raises(SettingsError) as info:
        load_settings(api_keys={"tenant-a": "my-plain-secret-key"})
    assert "SHA-256" in str(info.value) and "my-plain-secret-key" not in str(info.value)


def test_settings_refuse_bad_values_naming_the_field(tmp_path):
    with pytest.raises(SettingsError, match="fusion_method"):
        load_settings(fusion_method="no-such-method")
    with pytest.raises(SettingsError, match="storage_url"):
        load_settings(storage_url="mysql://x")
    with pytest.raises(SettingsError, match="panels"):
        load_settings(panels=[tmp_path / "missing.yaml"])


def test_settings_read_yaml_file_and_environment(tmp_path, monkeypatch):
    config = tmp_path / "judgefuse.yaml"
    config.write_text("port: 9001\nmax_batch_items: 8\nstorage_url: sqlite:///x.db\n")
    monkeypatch.setenv("JUDGEFUSE_JUDGING__MAX_BATCH_ITEMS", "16")
    settings = load_settings(config)
    assert settings.server.port == 9001 and settings.judging.max_batch_items == 16  # env beats the file
    assert settings.open_mode is True
    monkeypatch.setenv("JUDGEFUSE_WEB__API_KEYS", '{"t1": "' + "ab" * 32 + '"}')
    assert Settings().open_mode is False


def test_serve_command_refuses_a_bad_config_with_exit_2(tmp_path, capsys):
    import argparse

    from judgefuse.service.commands.serve import add_commands

    parser = argparse.ArgumentParser(prog="judgefuse")
    add_commands(parser.add_subparsers(dest="command", required=True))
    config = tmp_path / "bad.yaml"
    config.write_text("port: 99999\napi_keys: {t1: not-a-digest}\n")
    args = parser.parse_args(["serve", "--config", str(config)])
    assert args.handler(args) == 2
    err = capsys.readouterr().err
    assert "port" in err and "api_keys" in err and "not-a-digest" not in err
