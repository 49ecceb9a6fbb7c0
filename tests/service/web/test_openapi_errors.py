"""``/openapi.json`` describes the errors the server really sends (``ErrorBody``, never FastAPI's
``{"detail": [...]}``), the statuses of each operation, and how to authenticate.

The schemathesis suite (``test_fuzz.py``) checks every generated answer against the document;
the statuses it cannot provoke by generating requests (409, 408, 429, 503, ...) are provoked here
one by one and checked the same way (schemathesis' response checks against the document).
"""

from __future__ import annotations

import asyncio
import datetime
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from jf_test_support import app_support as S

from judgefuse.service.errors import Overloaded, error_body
from judgefuse.service.schemas import ErrorBody
from judgefuse.service.storage import SQLiteStorage, StorageUnavailable, VerdictRecord
from judgefuse.service.web.openapi import ERRORS

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
VOTES = [{"judge": j, "choice": "A", "confidence": 0.9} for j in S.JUDGES]
"""Posted to panel ``mirror``: the stub panel's judges, declared external (only such judges
take posted votes)."""


def mirror_panel(tmp_path):
    path = tmp_path / "panel-mirror.yaml"
    path.write_text("name: mirror\nfusion: majority\nquorum: 2\njudges:\n"
                    + "".join(f"  - {{name: {j}, external: true}}\n" for j in S.JUDGES))
    return path
ERROR_REF = "#/components/schemas/ErrorBody"
CONFORMANCE = ("status_code_conformance", "content_type_conformance", "response_schema_conformance",
               "response_headers_conformance")
"""schemathesis' response checks (``not_a_server_error`` left out: the 503s here are provoked)."""


def operations(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f"{method.upper()} {path}": operation
            for path, item in document["paths"].items() for method, operation in item.items()}


def schemas_in(value: Any) -> list[dict[str, Any]]:
    """Every JSON object in ``value``, depth first."""
    found: list[dict[str, Any]] = []
    if isinstance(value, dict):
        found.append(value)
        for item in value.values():
            found.extend(schemas_in(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(schemas_in(item))
    return found


@pytest.fixture
async def document(stub, tmp_path) -> dict[str, Any]:
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 's.db'}")
    async with S.running_app(settings) as (_app, client):
        response = await client.get("/openapi.json")
        assert response.status_code == 200
        return response.json()


# ------------------------------------------------------------------------------ the document
async def test_no_fastapi_validation_error_remains(document):
    text = json.dumps(document)
    assert "HTTPValidationError" not in text and "ValidationError" not in text
    assert not [s for s in schemas_in(document) if "detail" in s.get("properties", {})]
    assert set(document["components"]["schemas"]) >= {"ErrorBody", "ErrorField"}


async def test_every_operation_declares_its_errors_with_error_body(document):
    ops = operations(document)
    assert set(ops) == set(ERRORS) and len(ops) == 26
    for key, operation in ops.items():
        responses = operation["responses"]
        declared = {int(code) for code in responses if code.startswith(("4", "5"))}
        expected = set(ERRORS[key]) | ({503} if key == "GET /readyz" else set())
        assert declared == expected, key
        for code in ERRORS[key]:
            content = responses[str(code)]["content"]
            assert list(content) == ["application/json"], (key, code)
            assert content["application/json"]["schema"] == {"$ref": ERROR_REF}, (key, code)
        if "requestBody" in operation:
            assert "422" in responses and {400, 408, 413, 422} <= set(ERRORS[key]), key
    ready = ops["GET /readyz"]["responses"]["503"]["content"]["application/json"]["schema"]
    assert ready == {"$ref": "#/components/schemas/ReadyOut"}
    assert "422" not in ops["GET /v1/verdicts/{verdict_id}"]["responses"]  # any id: 404 at worst


async def test_error_body_is_the_model_and_takes_no_other_key(document):
    body = document["components"]["schemas"]["ErrorBody"]
    model = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
    model.pop("$defs")
    assert body == model
    assert body["required"] == ["error"] and body["additionalProperties"] is False
    assert body["properties"]["fields"]["items"] == {"$ref": "#/components/schemas/ErrorField"}
    # an absent key is left out, never null: no property admits null or defaults to it
    assert not [name for name, prop in body["properties"].items() if "default" in prop or "anyOf" in prop]
    # the bodies of errors the schemathesis suite cannot provoke fit the model
    ErrorBody.model_validate(Overloaded("max_inflight_per_tenant", 2, 7, tenant="t").body())
    ErrorBody.model_validate(error_body("storage unavailable, retry later"))


async def test_security_schemes_and_which_operations_need_a_key(document):
    schemes = document["components"]["securitySchemes"]
    bearer = [s for s in schemes.values() if s["type"] == "http"]
    api_key = [s for s in schemes.values() if s["type"] == "apiKey"]
    assert [s["scheme"] for s in bearer] == ["bearer"]
    assert [(s["in"], s["name"]) for s in api_key] == [("header", "X-API-Key")]
    for key, operation in operations(document).items():
        if key.split()[1].startswith("/v1/"):
            assert sorted(next(iter(r)) for r in operation["security"]) == sorted(schemes), key
            assert "401" in operation["responses"], key
        else:  # /healthz, /readyz: public
            assert "security" not in operation and "401" not in operation["responses"], key
    description = document["info"]["description"]
    assert "open mode" in description.lower() and "tenant `default`" in description


async def test_retry_after_is_declared_where_it_is_sent(document):
    seen = 0
    for key, operation in operations(document).items():
        for code, response in operation["responses"].items():
            headers = response.get("headers", {})
            if code == "429":
                assert headers["Retry-After"]["required"] is True, key
                assert headers["Retry-After"]["schema"] == {"type": "integer", "minimum": 1}
                seen += 1
            if code == "503" and response["content"]["application/json"]["schema"] == {"$ref": ERROR_REF}:
                assert "Retry-After" in headers and not headers["Retry-After"].get("required"), key
            if code == "401":
                assert headers["WWW-Authenticate"]["required"] is True, key
    assert seen == 6  # /v1/judge, /v1/fuse (admission), /v1/feedback, review next / skip (backpressure),
    # /v1/panels/{panel}/plan (the report gate)
    for key in ("POST /v1/judge/batch", "POST /v1/fuse/batch"):
        assert "Retry-After" in operations(document)[key]["responses"]["200"]["headers"]


# ------------------------------------------------------ statuses the fuzzing cannot provoke
class FlakyStorage(SQLiteStorage):
    """SQLite whose verdict lookups fail as an unreachable Redis / PostgreSQL would, on demand."""

    down = False

    async def get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        if self.down:
            raise StorageUnavailable("connection refused")
        return await super().get_verdict(tenant, verdict_id)


async def slow_body() -> AsyncIterator[bytes]:
    yield b'{"verdict_id": "x", '
    await asyncio.sleep(1.0)
    yield b'"label": "A"}'


async def test_provoked_errors_conform_to_the_document(stub, tmp_path):
    """Every error status of the table, provoked on a live app, passes schemathesis' checks
    (status declared, JSON, ``ErrorBody``, required headers) for its operation."""
    schemathesis = pytest.importorskip("schemathesis")
    known_checks = pytest.importorskip("schemathesis.checks")

    checks = [getattr(known_checks, name) for name in CONFORMANCE]
    server, script = stub
    storage = FlakyStorage(tmp_path / "flaky.sqlite3")
    await storage.open()
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url), mirror_panel(tmp_path)],
                               max_body_bytes=4096, max_batch_items=2, max_inflight_per_tenant=1,
                               body_timeout_s=0.2)
    a = S.auth("tenant-a")
    provoked: dict[str, set[int]] = {}
    try:
        async with S.running_app(settings, storage=storage) as (app, client):
            spec = schemathesis.openapi.from_dict(app.openapi())

            def conforms(key: str, response: httpx.Response, status: int) -> None:
                assert response.status_code == status, (key, response.status_code, response.text)
                method, path = key.split(" ", 1)
                sent = response.request.url.path.rsplit("/", 1)[-1]
                case = spec[path][method].Case(path_parameters={"verdict_id": sent} if "{" in path else None)
                case.validate_response(response, checks=checks)
                ErrorBody.model_validate(response.json())
                provoked.setdefault(key, set()).add(status)

            conforms("GET /healthz", await client.get("/healthz", params={"api_key": "k"}), 400)
            conforms("POST /v1/judge", await client.post(
                "/v1/judge", content=b'{"question": "\xff"}', headers={**a, "Content-Type": "application/json"}), 400)
            conforms("GET /v1/calibration", await client.get(
                "/v1/calibration", headers={"X-API-Key": "wrong"}), 401)
            conforms("GET /v1/verdicts/{verdict_id}", await client.get("/v1/verdicts/nope", headers=a), 404)
            conforms("POST /v1/feedback", await client.post(
                "/v1/feedback", json={"verdict_id": "nope", "label": "A"}, headers=a), 404)
            conforms("POST /v1/review/skip", await client.post(
                "/v1/review/skip", json={"verdict_id": "nope"}, headers=a), 404)
            annotator = await client.post("/v1/annotators", json={"name": "ann"}, headers=a)
            assert annotator.status_code == 201, annotator.text
            as_annotator = {"Authorization": f"Bearer {annotator.json()['credential']}"}
            conforms("POST /v1/thresholds/tune", await client.post(
                "/v1/thresholds/tune", json={"target_precision": 0.9}, headers=as_annotator), 403)
            conforms("POST /v1/annotators", await client.post(
                "/v1/annotators", json={"name": "ann"}, headers=a), 409)
            slow = await client.post("/v1/feedback", content=slow_body(),
                                     headers={**a, "Content-Type": "application/json"})
            # schemathesis reads the request's content: a streamed one has none to read
            slow = httpx.Response(slow.status_code, headers=slow.headers, content=slow.content,
                                  request=httpx.Request("POST", slow.request.url, content=b"{}"))
            slow.elapsed = datetime.timedelta(0)
            conforms("POST /v1/feedback", slow, 408)
            first = await client.post("/v1/judge", json={**PAIR, "id": "v-1"}, headers=a)
            assert first.status_code == 200, first.text
            conforms("POST /v1/judge", await client.post(
                "/v1/judge", json={**PAIR, "id": "v-1", "answer_b": "6"}, headers=a), 409)
            conforms("POST /v1/fuse", await client.post(
                "/v1/fuse", json={**PAIR, "id": "v-1", "answer_b": "6", "panel": "mirror", "votes": VOTES}, headers=a), 409)
            conforms("POST /v1/judge", await client.post(
                "/v1/judge", json={**PAIR, "question": "x" * 5000}, headers=a), 413)
            conforms("POST /v1/judge/batch", await client.post(
                "/v1/judge/batch", json={"items": [PAIR] * 3}, headers=a), 413)
            conforms("POST /v1/judge", await client.post("/v1/judge", json={"question": "q"}, headers=a), 422)
            conforms("GET /v1/calibration", await client.get(
                "/v1/calibration", params={"n_bins": 7}, headers=a), 422)

            # 429: one request in flight per tenant, the judges slow
            for judge in S.JUDGES:
                script.set(judge, action=S.stub_module.Reply(texts=S.sc_text("A", 80), delay_s=0.3))
            held = asyncio.create_task(client.post("/v1/judge", json=PAIR, headers=a))
            await asyncio.sleep(0.1)
            conforms("POST /v1/judge", await client.post("/v1/judge", json=PAIR, headers=a), 429)
            batch = await client.post("/v1/judge/batch", json={"items": [PAIR]}, headers=a)
            conforms("POST /v1/fuse", await client.post("/v1/fuse", json={**PAIR, "panel": "mirror", "votes": VOTES},
                                                        headers=a), 429)
            assert (await held).status_code == 200
            # a batch whose item was refused: 200 with Retry-After, checked against the document too
            assert batch.status_code == 200 and batch.json()["results"][0]["status"] == 429
            assert int(batch.headers["Retry-After"]) >= 1
            spec["/v1/judge/batch"]["POST"].Case().validate_response(batch, checks=checks)

            # 503: the panel's quorum lost (no Retry-After), storage unavailable (Retry-After: 1)
            script.set("j2", action=S.stub_module.Status(500, "upstream exploded"))
            script.set("j3", action=S.stub_module.Garbage())
            lost = await client.post("/v1/judge", json=PAIR, headers=a)
            conforms("POST /v1/judge", lost, 503)
            assert lost.json()["failed_judges"] and "retry-after" not in lost.headers
            storage.down = True
            down = await client.get("/v1/verdicts/v-1", headers=a)
            conforms("GET /v1/verdicts/{verdict_id}", down, 503)
            assert down.headers["Retry-After"] == "1"
    finally:
        await storage.close()
    statuses = set().union(*provoked.values())
    assert statuses == {400, 401, 403, 404, 408, 409, 413, 422, 429, 503}
    for key, codes in provoked.items():
        assert codes <= set(ERRORS[key]), key
