"""Every JSON endpoint has a typed response model, so ``/openapi.json`` describes its body."""

from __future__ import annotations

from jf_test_support import app_support as S

# (method, path) -> the component its 200 response must reference
TYPED = {
    ("post", "/v1/judge"): "VerdictOut",
    ("post", "/v1/judge/batch"): "BatchResponse",
    ("post", "/v1/fuse"): "VerdictOut",
    ("post", "/v1/fuse/batch"): "BatchResponse",
    ("post", "/v1/feedback"): "LabelResult",
    ("get", "/v1/verdicts/{verdict_id}"): "VerdictOut",
    ("get", "/v1/calibration"): "CalibrationOut",
    ("post", "/v1/fusion/refit"): "RefitOut",
    ("get", "/v1/fusion/models"): "ModelsOut",
    ("get", "/v1/thresholds"): "ThresholdsOut",
    ("post", "/v1/thresholds/tune"): "TuneOut",
    ("get", "/v1/review/next"): "ReviewNextOut",
    ("post", "/v1/review/skip"): "ReviewSkipOut",
    ("get", "/v1/review/stats"): "ReviewStatsOut",
    ("get", "/healthz"): "HealthOut",
}


def _ref(operation: dict) -> str | None:
    content = operation["responses"].get("200", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema", {})
    return schema.get("$ref", "").rpartition("/")[2] or None


async def test_openapi_describes_every_json_body(stub, tmp_path):
    server, _script = stub
    settings = S.make_settings(tmp_path, [S.panel_yaml(tmp_path, server.url)],
                               storage_url=f"sqlite:///{tmp_path / 's.db'}")
    async with S.running_app(settings) as (_app, client):
        response = await client.get("/openapi.json")
        assert response.status_code == 200
        document = response.json()
        paths = document["paths"]
        components = document["components"]["schemas"]
        for (method, path), component in TYPED.items():
            assert _ref(paths[path][method]) == component, (method, path)
            assert components[component]["properties"], component
        untyped = [
            f"{method.upper()} {path}"
            for path, operations in paths.items()
            for method, operation in operations.items()
            if method in ("get", "post", "put", "delete") and path != "/readyz"
            and "application/json" in operation["responses"].get("200", {}).get("content", {})
            and _ref(operation) is None
        ]
        assert not untyped, f"JSON endpoints without a response model: {untyped}"
        calibration = components["CalibrationKeyOut"]["properties"]
        assert {"key", "kind", "all_time", "population"} <= set(calibration)

        # the models answer what the handlers answered before: real bodies still validate
        h = S.auth("tenant-a")
        for path in ("/v1/calibration", "/v1/thresholds", "/v1/fusion/models", "/v1/review/stats",
                     "/v1/review/next?annotator=ann", "/healthz"):
            got = await client.get(path, headers=h)
            assert got.status_code == 200, (path, got.text)
        stats = (await client.get("/v1/review/stats", headers=h)).json()
        assert {"panel", "audit_rate", "strata", "queue_depth", "leased"} <= set(stats)
        refit = (await client.post("/v1/fusion/refit", json={}, headers=h)).json()
        assert refit["status"] == "skipped" and refit["active_method"] == "majority"
        tune = await client.post("/v1/thresholds/tune", json={"target_precision": 0.9}, headers=h)
        assert tune.status_code == 200, tune.text
        assert tune.json()["stored"] is False
