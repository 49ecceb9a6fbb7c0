"""Bad input: >= 10,000 generated requests against the app in process; zero 5xx, every 4xx says
what was wrong (JSON with a non-empty ``error``; a 422 also lists ``fields`` naming at least one).

Three generators, all derandomized (same requests on every run):

* **schemathesis** over ``app.openapi()``: positive and negative cases of every operation, with a
  tenant key and without one; each answer's status, content type, body and headers are checked
  against the document (``CONFORMANCE``);
* **hypothesis from the schema** (faster, so it carries most of the volume): for each operation's
  request body and query parameters, values drawn from the OpenAPI types, then mutated (a
  required field dropped, a wrong type, an unknown field, a huge string, null, NaN, surrogates);
* **raw HTTP**: any method on known and unknown paths, random bytes and broken JSON, every
  content type, bad auth headers.

The app runs with its lifespan in a background thread (its own event loop) with the panel at the
scripted OpenAI stub; hypothesis tests are plain sync functions that submit each request to that
loop. ``httpx.ASGITransport`` re-raises unhandled app exceptions: they are reported as 5xx.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from jf_test_support import app_support as S

from judgefuse.service.judging.request_checks import json_depth

PAIR = {"question": "What is 2+2?", "answer_a": "4", "answer_b": "5"}
MAX_TEXT = 300
MAX_BODY = 64 * 1024
MAX_BATCH = 3

PER_EXAMPLE = 16
"""Requests drawn per hypothesis example and sent concurrently (amortises the engine's overhead)."""
SENT: Counter[str] = Counter()
"""Requests sent, per test (the last test checks the total)."""
STATUSES: Counter[int] = Counter()
COLLECT = os.environ.get("JUDGEFUSE_FUZZ_COLLECT") == "1"
"""Survey mode: record 5xx / silent 4xx in FOUND instead of failing (to list every distinct bug)."""
FOUND: dict[str, str] = {}


def fuzz_settings(n: int) -> settings:
    return settings(
        max_examples=n, derandomize=True, database=None, deadline=None,
        suppress_health_check=list(HealthCheck), print_blob=False,
    )


# --------------------------------------------------------------------------- the app, in a thread
class AppThread:
    """The app (lifespan running) and the stub, served from their own event loop in a thread."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="fuzz-app", daemon=True)
        self.known_ids: dict[str, str] = {}

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        except BaseException as exc:  # surfaced by start()
            self._error = exc
            self._ready.set()
        finally:
            self.loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        server = await S.stub_module.StubServer().start()
        script = S.Script()
        server.handler = script.handler
        server.require_key = S.PLANTED
        server.record = False
        try:
            # judges given a minute: the stub answers on this loop, which a 12,000-wide body
            # can hold for seconds on a loaded machine, and a judge timeout is a 503 the
            # oracle would count as a 5xx (the fuzz is about bodies, not about time)
            settings_ = S.make_settings(
                self.tmp, [S.panel_yaml(self.tmp, server.url, timeout_s=60.0, deadline_s=120.0)],
                storage_url=f"sqlite:///{self.tmp / 'fuzz.sqlite3'}",
                sqlite_synchronous="NORMAL", max_body_bytes=MAX_BODY, max_text_chars=MAX_TEXT,
                max_batch_items=MAX_BATCH, min_labels_for_refit=10, refit_max_labels=200,
            )
            async with S.running_app(settings_) as (_app, client):
                self.client = client
                self.openapi = _app.openapi()
                self._ready.set()
                await self._stop.wait()
        finally:
            await server.stop()

    def start(self) -> AppThread:
        self.thread.start()
        if not self._ready.wait(60):
            raise RuntimeError("the fuzz app did not start")
        if self._error is not None:
            raise self._error
        return self

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(30)

    def build(self, method: str, url: str, **kwargs: Any) -> httpx.Request:
        """The request as the client would send it (raises here when httpx refuses to build it)."""
        return self.client.build_request(method, url, **kwargs)

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        result = self.send_all([self.build(method, url, **kwargs)])[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def send_all(self, requests: list[httpx.Request]) -> list[httpx.Response | BaseException]:
        """Send concurrently on the app's loop; an app exception is returned in its place."""

        async def gather() -> list[httpx.Response | BaseException]:
            return await asyncio.gather(*(self.client.send(r) for r in requests), return_exceptions=True)

        return asyncio.run_coroutine_threadsafe(gather(), self.loop).result(120)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory):
    runner = AppThread(tmp_path_factory.mktemp("fuzz")).start()
    try:
        # labelled verdicts to aim at: feedback / verdict lookups / tune / refit see real data
        for tenant in ("tenant-a", "tenant-b"):
            for i in range(12):
                r = runner.send("POST", "/v1/judge", json={**PAIR, "label": "AB"[i % 2]},
                                headers=S.auth(tenant))
                assert r.status_code == 200, r.text
                runner.known_ids.setdefault(tenant, r.json()["id"])
        yield runner
    finally:
        runner.close()


# --------------------------------------------------------------------------------- the oracle
def describe(method: str, url: str, kwargs: dict[str, Any]) -> str:
    shown = {k: (v[:300] if isinstance(v, (str, bytes)) else v) for k, v in kwargs.items()}
    return f"{method} {url[:300]} {str(shown)[:1500]}"


Call = tuple[str, str, dict[str, Any]]
"""(method, url, httpx keyword arguments)."""


def check(app: AppThread, test: str, method: str, url: str, **kwargs: Any) -> httpx.Response:
    """Send one request through :func:`check_many`."""
    out = check_many(app, test, [(method, url, kwargs)])
    return out[0] if out else httpx.Response(499)


def check_many(app: AppThread, test: str, calls: list[Call]) -> list[httpx.Response]:
    """Send ``calls`` concurrently; fail on a 5xx (or an app exception) or a 4xx that says nothing.

    Requests httpx refuses to build (e.g. a header it cannot encode) are dropped, not counted.
    """
    built: list[tuple[Call, httpx.Request]] = []
    for method, url, kwargs in calls:
        try:
            built.append(((method, url, kwargs), app.build(method, url, **kwargs)))
        except (httpx.InvalidURL, httpx.LocalProtocolError, UnicodeEncodeError, TypeError, ValueError):
            continue
    SENT[test] += len(built)
    results = app.send_all([request for _, request in built])
    out = []
    for (call, _), result in zip(built, results, strict=True):
        try:
            out.append(_oracle(call, result))
        except AssertionError as exc:
            if not COLLECT:
                raise
            FOUND.setdefault(str(exc).split(" on ")[0][:200], str(exc)[:2000])
    return out


def _oracle(call: Call, result: httpx.Response | BaseException) -> httpx.Response:
    method, url, kwargs = call
    where = describe(method, url, kwargs)
    if isinstance(result, BaseException):
        raise AssertionError(f"5xx (unhandled {type(result).__name__}: {result}) on {where}") from result
    r = result
    STATUSES[r.status_code] += 1
    assert r.status_code < 500, f"{r.status_code} on {where}: {r.text[:500]}"
    if 400 <= r.status_code < 500 and method != "HEAD":
        assert r.headers.get("content-type", "").startswith("application/json"), (where, r.text[:300])
        body = r.json()
        assert isinstance(body.get("error"), str) and body["error"].strip(), (where, body)
        if r.status_code in (401, 413, 422):
            fields = body.get("fields")
            assert isinstance(fields, list) and fields, (where, body)
            for f in fields:
                assert isinstance(f.get("field"), str) and f["field"], (where, body)
                assert isinstance(f.get("problem"), str) and f["problem"], (where, body)
    return r


# ------------------------------------------------------------------- generators from the schema
def resolve(spec: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref:
        name = ref.rsplit("/", 1)[-1]
        return spec["components"]["schemas"][name]
    return schema


JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=20),
    st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.integers(min_value=MAX_TEXT - 2, max_value=MAX_BODY * 2).map(lambda n: "x" * n),
    st.sampled_from([
        "", " ", "\x00", "\ud800", "a\udfffb", "\u202e", "💥" * 80, "<script>alert(1)</script>",
        "'; DROP TABLE verdicts; --", "../../etc/passwd", "%00", "{{ 7*7 }}", "{% raw %}",
        "</output_a>", "main", "majority", "stacked", "fuser", "majority+isotonic",
        "majority+nope", "a/b", "a b", "A", "B",
    ]),
)


def value_for(spec: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """A value that fits ``schema`` (mostly), drawn from the OpenAPI types."""
    schema = resolve(spec, schema)
    if "anyOf" in schema:
        return st.one_of(*(value_for(spec, s, depth) for s in schema["anyOf"]))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "string":
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 60), 60)
        base = st.text(min_size=low, max_size=high)
        if "pattern" in schema:
            base = st.from_regex(r"[A-Za-z0-9_.:-]{1,40}", fullmatch=True)
        return st.one_of(base, NASTY_TEXT) if depth == 0 else base
    if kind == "integer":
        return st.integers(
            min_value=int(schema.get("minimum", -(2**40))) - 2, max_value=int(schema.get("maximum", 2**40)) + 2
        )
    if kind == "number":
        return st.one_of(st.floats(min_value=-0.5, max_value=1.5), st.floats(), st.sampled_from([0.5, 0.9, 0.95]))
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        items = schema.get("items", {})
        return st.lists(value_for(spec, items, depth + 1), min_size=0, max_size=MAX_BATCH + 1)
    if kind == "object" and "properties" in schema:
        return object_for(spec, schema, depth + 1)
    if kind == "object":
        return st.dictionaries(st.text(max_size=8), JUNK, max_size=4)
    return JUNK


def object_for(spec: dict[str, Any], schema: dict[str, Any], depth: int = 0) -> st.SearchStrategy[dict]:
    props = schema.get("properties", {})
    required = set(schema.get("required", []))
    fixed = {k: value_for(spec, v, depth) for k, v in props.items() if k in required}
    optional = {k: value_for(spec, v, depth) for k, v in props.items() if k not in required}
    return st.fixed_dictionaries(fixed, optional=optional)


@st.composite
def mutated(draw: st.DrawFn, base: st.SearchStrategy[dict], schema: dict[str, Any]) -> Any:
    """``base`` as drawn, or with one deliberate fault."""
    body = dict(draw(base))
    fault = draw(st.sampled_from(["none", "none", "drop", "wrong_type", "unknown", "null", "not_object"]))
    keys = sorted(schema.get("properties", {}))
    if fault == "drop" and body:
        body.pop(draw(st.sampled_from(sorted(body))))
    elif fault == "wrong_type" and keys:
        body[draw(st.sampled_from(keys))] = draw(JUNK)
    elif fault == "unknown":
        body[draw(st.sampled_from(["surprise", "Question", "__proto__", "tenant", "api_key"]))] = draw(JUNK)
    elif fault == "null" and keys:
        body[draw(st.sampled_from(keys))] = None
    elif fault == "not_object":
        return draw(JUNK)
    return body


AUTH = st.sampled_from(
    [S.auth("tenant-a")] * 6 + [S.auth("tenant-b")] * 2 + [
        {}, {"Authorization": "Bearer "}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic eDp5"},
        {"Authorization": "bearer " + S.TENANT_KEYS["tenant-a"]}, {"X-API-Key": S.TENANT_KEYS["tenant-b"]},
        {"X-API-Key": ""}, {"Authorization": "Bearer " + "k" * 5000}, {"Authorization": "Token abc"},
    ]
)


def body_kwargs(body: Any, headers: dict[str, str]) -> dict[str, Any]:
    try:
        raw = json.dumps(body).encode()  # NaN/Infinity allowed, surrogates escaped
    except (TypeError, ValueError):
        raw = repr(body).encode("utf-8", "surrogatepass")
    return {"content": raw, "headers": {**headers, "Content-Type": "application/json"}}


def body_test(path: str, component: str, examples: int):
    @fuzz_settings(examples // PER_EXAMPLE)
    @given(data=st.data())
    def run(app: AppThread, data: st.DataObject) -> None:
        schema = app.openapi["components"]["schemas"][component]
        calls = []
        for _ in range(PER_EXAMPLE):
            body = data.draw(mutated(object_for(app.openapi, schema), schema), label="body")
            headers = data.draw(AUTH, label="headers")
            calls.append(("POST", path, body_kwargs(body, headers)))
        check_many(app, f"body {path}", calls)

    return run


def test_schema_has_the_operations_fuzzed_here(app):
    ops = {(m.upper(), p) for p, item in app.openapi["paths"].items() for m in item}
    assert ops == {
        ("GET", "/healthz"), ("GET", "/readyz"), ("POST", "/v1/judge"), ("POST", "/v1/judge/batch"),
        ("GET", "/v1/verdicts/{verdict_id}"), ("POST", "/v1/feedback"), ("GET", "/v1/calibration"),
        ("GET", "/v1/thresholds"), ("POST", "/v1/thresholds/tune"), ("POST", "/v1/fusion/refit"),
        ("GET", "/v1/fusion/models"), ("GET", "/v1/fusion/refits"), ("POST", "/v1/fuse"),
        ("POST", "/v1/fuse/batch"), ("GET", "/v1/review/next"), ("POST", "/v1/review/skip"), ("GET", "/v1/review/stats"),
        ("GET", "/v1/monitor"), ("POST", "/v1/monitor/clear"),
        ("GET", "/v1/annotators"), ("POST", "/v1/annotators"), ("GET", "/v1/annotators/me"),
        ("POST", "/v1/annotators/{annotator}/revoke"), ("POST", "/v1/annotators/{annotator}/rotate"),
        ("GET", "/v1/panels/{panel}/winrate"), ("GET", "/v1/panels/{panel}/plan"),
    }, "a new operation: add it to the fuzz tests (schemathesis covers every operation)"


# ----------------------------------------------- 1. hypothesis from the schema (most of the volume)
@pytest.mark.parametrize(("path", "component", "examples"), [
    ("/v1/fusion/refit", "RefitRequest", 100),
    ("/v1/thresholds/tune", "TuneRequest", 500),
    ("/v1/feedback", "FeedbackRequest", 700),
    ("/v1/review/skip", "ReviewSkipRequest", 300),
    ("/v1/monitor/clear", "MonitorClearRequest", 200),
])
def test_bodies_from_schema_before_traffic(app, path, component, examples):
    body_test(path, component, examples)(app)


@pytest.mark.parametrize(("path", "examples"), [
    ("/v1/calibration", 700), ("/v1/thresholds", 500), ("/v1/fusion/models", 500), ("/v1/fusion/refits", 200),
    ("/v1/review/next", 400), ("/v1/review/stats", 200), ("/v1/monitor", 200),
    ("/v1/panels/{panel}/winrate", 300), ("/v1/panels/{panel}/plan", 200),
])
def test_query_parameters_from_schema(app, path, examples):
    @fuzz_settings(examples // PER_EXAMPLE)
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        check_many(app, f"query {path}", [draw_query(data) for _ in range(PER_EXAMPLE)])

    def draw_query(data: st.DataObject) -> Call:
        params_spec = [p for p in app.openapi["paths"][path]["get"].get("parameters", []) if p["in"] == "query"]
        params: list[tuple[str, str]] = []
        for p in params_spec:
            if data.draw(st.booleans()):
                value = data.draw(st.one_of(value_for(app.openapi, p["schema"]), JUNK), label=p["name"])
                text = json.dumps(value) if not isinstance(value, str) else value
                params.append((p["name"], text))
        if data.draw(st.integers(0, 9)) == 0:
            params.append((data.draw(st.sampled_from(["eps", "n_bins", "x", "panel"])),
                           data.draw(st.sampled_from(["0.1", "0.05", "0.2", "nan", "-1", "1000", "3", "", "main"]))))
        headers = data.draw(AUTH)
        url = path.replace("{panel}", data.draw(st.sampled_from(["main", "nope", "m%20ain"]), label="panel"))
        return ("GET", url, {"params": params, "headers": headers})

    run()


def test_verdict_ids(app):
    from urllib.parse import quote

    vids = st.one_of(
        st.sampled_from([app.known_ids["tenant-a"], app.known_ids["tenant-b"], "x" * 257, "x" * 5000]),
        st.text(min_size=1, max_size=300),
    )

    @fuzz_settings(1000 // PER_EXAMPLE)
    @given(calls=st.lists(st.tuples(vids, AUTH), min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def run(calls: list[tuple[str, dict[str, str]]]) -> None:
        check_many(app, "verdict ids", [
            ("GET", "/v1/verdicts/" + quote(vid, safe=""), {"headers": headers}) for vid, headers in calls])

    run()


@pytest.mark.parametrize(("path", "component", "examples"), [
    ("/v1/judge", "JudgeRequest", 1500),
    ("/v1/judge/batch", "BatchRequest", 250),
    ("/v1/fuse", "FuseRequest", 800),
    ("/v1/fuse/batch", "FuseBatchRequest", 200),
])
def test_bodies_from_schema(app, path, component, examples):
    body_test(path, component, examples)(app)


# ------------------------------------------------------------------------------- 2. raw HTTP
PATHS = ["/v1/judge", "/v1/judge/batch", "/v1/feedback", "/v1/calibration", "/v1/thresholds",
         "/v1/thresholds/tune", "/v1/fusion/refit", "/v1/fusion/models", "/v1/verdicts/x",
         "/healthz", "/readyz", "/console/calibration", "/metrics", "/v1/", "/v2/judge", "/v1/judge/",
         "/v1/verdicts/", "/v1/verdicts/a/b", "/%00", "/v1/judge%20", "/" + "a" * 3000,
         "/v1/fuse", "/v1/fuse/batch", "/v1/review/next", "/v1/review/skip", "/v1/review/stats",
         "/review", "/review/login", "/review/label", "/review/skip", "/review/logout",
         "/v1/monitor", "/v1/monitor/clear"]
RAW_BODIES = st.one_of(
    st.binary(max_size=200),
    st.sampled_from([b"", b"{", b"}", b"null", b"[]", b"{}", b"\xef\xbb\xbf{}", b"\xff\xfe{\x00}\x00",
                     b'{"question": "q", "answer_a": "a", "answer_b": "b"',  # truncated
                     b'{"question": "q", "question": 1, "answer_a": "a", "answer_b": "b"}',
                     b"[" * 50_000, b'{"a":' * 20_000, b'{"target_precision": NaN}', b"1e999",
                     b'{"items": [' + b'{"question":"q","answer_a":"a","answer_b":"b"},' * 3 + b"1]}",
                     b"question=q&answer_a=a&answer_b=b"]),
    st.text(max_size=100).map(lambda s: s.encode("utf-8", "surrogatepass")),
)
CONTENT_TYPES = st.sampled_from([
    None, "application/json", "application/json; charset=utf-8", "application/json; charset=latin-1",
    "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz",
    "multipart/form-data", "application/xml", "*/*", "application/json\x7f", "garbage",
])
METHODS = st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "HEAD", "TRACE", "POST", "POST"])


def test_raw_requests(app):
    one = st.tuples(METHODS, st.sampled_from(PATHS), RAW_BODIES, CONTENT_TYPES, AUTH,
                    st.sampled_from([None, "http://evil.example"]))

    @fuzz_settings(4500 // PER_EXAMPLE)
    @given(drawn=st.lists(one, min_size=PER_EXAMPLE, max_size=PER_EXAMPLE))
    def run(drawn):
        calls: list[Call] = []
        for method, path, body, ctype, headers, origin in drawn:
            headers = dict(headers)
            if ctype is not None:
                headers["Content-Type"] = ctype
            if origin is not None:
                headers["Origin"] = origin
            kwargs: dict[str, Any] = {"headers": headers}
            if method not in ("GET", "HEAD", "OPTIONS", "TRACE") or body:
                kwargs["content"] = body
            calls.append((method, path, kwargs))
        for r in check_many(app, "raw", calls):
            assert "access-control-allow-origin" not in r.headers  # CORS is off by default

    run()


# -------------------------------------------------------------- 3. schemathesis over the schema
CONFORMANCE = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
               "response_schema_conformance", "response_headers_conformance")
"""schemathesis' checks run on every answer: the document (``/openapi.json``) is the contract,
for errors as for successes (a status, content type, body key or header it does not declare
fails the test)."""
KEYS = {"tenant key": (S.auth("tenant-a"), 8), "no key": ({}, 4)}
"""Credentials sent with each case, and the examples per operation and generation mode (without
a key nearly every answer is the same 401: fewer are enough)."""
CHECKED: Counter[tuple[str, str, int]] = Counter()
"""(key, operation, status) -> answers that passed the checks."""


@pytest.mark.parametrize("key", list(KEYS))
def test_schemathesis_positive_and_negative(app, key):
    schemathesis = pytest.importorskip("schemathesis")
    known_checks = pytest.importorskip("schemathesis.checks")
    from schemathesis import GenerationMode

    checks = [getattr(known_checks, name) for name in CONFORMANCE]
    auth, examples = KEYS[key]
    schema = schemathesis.openapi.from_dict(app.openapi)
    operations = [op.ok() for op in schema.get_all_operations()]
    assert len(operations) == 26  # GET /v1/panels/{panel}/plan joined the 25
    for operation in operations:
        has_input = bool(operation.definition.raw.get("parameters") or operation.definition.raw.get("requestBody"))
        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE] if has_input else [GenerationMode.POSITIVE]
        for mode in modes:

            @fuzz_settings(examples if has_input else 1)
            @given(case=operation.as_strategy(generation_mode=mode))
            def run(case: Any) -> None:
                kw = case.as_transport_kwargs(base_url="http://testserver", headers=auth)
                headers = {k: v for k, v in kw.get("headers", {}).items()
                           if k.lower() not in ("connection", "accept-encoding")
                           and (auth or k.lower() not in ("authorization", "x-api-key"))}
                params = []
                for name, value in (kw.get("params") or {}).items():
                    for item in value if isinstance(value, list) else [value]:
                        params.append((name, item if isinstance(item, str) else json.dumps(item)))
                kwargs: dict[str, Any] = {"headers": headers, "params": params}
                if "json" in kw:
                    kwargs.update(body_kwargs(kw["json"], headers))
                elif kw.get("data") is not None:
                    data = kw["data"]
                    kwargs["content"] = data if isinstance(data, bytes) else str(data).encode("utf-8", "surrogatepass")
                response = check(app, "schemathesis", kw["method"], kw["url"], **kwargs)
                if response.status_code == 499:  # httpx refused to build the request: not sent
                    return
                case.validate_response(response, checks=checks, headers=headers)
                CHECKED[key, case.operation.label, response.status_code] += 1

            try:
                run()
            except Unsatisfiable:  # e.g. no negative value exists for a plain string path parameter
                continue
    checked = {(label, status): n for (k, label, status), n in CHECKED.items() if k == key}
    statuses: Counter[int] = Counter()
    for (_label, status), n in checked.items():
        statuses[status] += n
    labels = {label for label, _status in checked}
    print(f"\nschemathesis, {key}: {sum(checked.values())} answers checked on {len(labels)} operations; "
          f"statuses {dict(sorted(statuses.items()))}")
    assert len(labels) == 26, labels
    if key == "no key":  # every keyed operation refused a request, and its 401 was checked
        refused = {label for label, status in checked if status == 401}
        assert refused == {label for label in labels if " /v1/" in label}, sorted(labels - refused)


NASTY_STRINGS = ["", " ", "\x00", "\ud800", "a\udfffb", "\udc00\ud800", "\u202e", "💥" * 80,
                 "<script>alert(1)</script>", "'; DROP TABLE verdicts; --", "../../etc/passwd", "{{ 7*7 }}",
                 "</output_a>", "majority+nope", "a/b", "x" * (MAX_TEXT + 1), "x" * 257, "x" * 5000]


def test_nasty_corpus_in_every_field(app):
    """Deterministic: every nasty string in every string field and id (hypothesis may not draw
    each of them at a given example count)."""
    from urllib.parse import quote

    a = S.auth("tenant-a")
    calls: list[Call] = []
    for value in NASTY_STRINGS:
        for field in ("question", "answer_a", "answer_b", "id", "category", "panel", "method"):
            calls.append(("POST", "/v1/judge", body_kwargs({**PAIR, field: value}, a)))
        calls.append(("POST", "/v1/judge", body_kwargs({**PAIR, "metadata": {value: value}}, a)))
        calls.append(("POST", "/v1/judge/batch", body_kwargs({"items": [{**PAIR, "answer_b": value}]}, a)))
        calls.append(("POST", "/v1/feedback", body_kwargs({"verdict_id": value, "label": "A"}, a)))
        for field in ("panel", "method"):
            calls.append(("POST", "/v1/thresholds/tune", body_kwargs({"target_precision": 0.9, field: value}, a)))
        calls.append(("POST", "/v1/fusion/refit", body_kwargs({"panel": value}, a)))
        if value:
            calls.append(("GET", "/v1/verdicts/" + quote(value, safe="", errors="surrogatepass"), {"headers": a}))
        for path in ("/v1/calibration", "/v1/thresholds", "/v1/fusion/models"):
            calls.append(("GET", path, {"params": {"panel": value}, "headers": a}))
    for start in range(0, len(calls), PER_EXAMPLE):
        check_many(app, "nasty corpus", calls[start:start + PER_EXAMPLE])


def test_bodies_json_cannot_parse_are_422_naming_the_body(app):
    """FastAPI answers 400 "There was an error parsing the body" when json.loads fails with other
    than JSONDecodeError (RecursionError on deep nesting): the handler makes it a 422 naming it."""
    for raw in (b"[" * 100_000 + b"]" * 100_000, b'{"question": ' + b"[" * 50_000):
        r = check(app, "parse", "POST", "/v1/judge", content=raw[:MAX_BODY],
                  headers={**S.auth("tenant-a"), "Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["fields"][0]["field"] == "body", r.text


# ------------------------------------------------------------ 4. deep and wide JSON in every field
def _deep(depth: int, kind: str) -> bytes:
    """``depth`` nested containers, written by hand (json.dumps recurses too deep past ~990)."""
    if kind == "dict":
        return b'{"k":' * (depth - 1) + b"{}" + b"}" * (depth - 1)
    return b"[" * depth + b"]" * depth


def _wide(width: int, kind: str) -> bytes:
    if kind == "dict":
        return json.dumps({f"k{i}": i for i in range(width)}).encode()
    return json.dumps(list(range(width))).encode()


def _nest(inner: st.SearchStrategy) -> st.SearchStrategy:
    """One level of nesting for ``st.recursive`` (a named function: hypothesis reads a multi-line
    lambda's source as "<unknown>" and warns that it cannot recurse)."""
    return st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4))


JSON_VALUE = st.one_of(
    st.builds(_deep, st.integers(1, 1200), st.sampled_from(["dict", "list"])),
    st.builds(_deep, st.sampled_from([31, 32, 33, 64, 255, 256, 257, 990]), st.sampled_from(["dict", "list"])),
    st.builds(_wide, st.integers(0, 12_000), st.sampled_from(["dict", "list"])),
    st.recursive(JUNK, _nest, max_leaves=40).map(lambda v: json.dumps(v).encode()),
)
FIELDS_OF = {
    "/v1/judge": ("JudgeRequest", {**PAIR}),
    "/v1/judge/batch": ("JudgeRequest", {**PAIR}),
    "/v1/feedback": ("FeedbackRequest", {"verdict_id": "x", "label": "A"}),
    "/v1/thresholds/tune": ("TuneRequest", {"target_precision": 0.9}),
    "/v1/fusion/refit": ("RefitRequest", {}),
}


def test_deep_and_wide_json_in_every_field(app):
    """Any field of any body (a batch item's too) set to JSON nested up to 1,200 levels or
    12,000 wide: never a 5xx, and a ``metadata`` deeper than the limit (32) is never judged."""
    slots = [(path, field) for path, (component, _) in FIELDS_OF.items()
             for field in app.openapi["components"]["schemas"][component]["properties"]]

    @fuzz_settings(800 // PER_EXAMPLE)
    @given(drawn=st.lists(st.tuples(st.sampled_from(slots), JSON_VALUE), min_size=PER_EXAMPLE,
                          max_size=PER_EXAMPLE))
    def run(drawn: list[tuple[tuple[str, str], bytes]]) -> None:
        calls: list[Call] = []
        for (path, field), raw in drawn:
            base = {**FIELDS_OF[path][1], field: "@@VALUE@@"}
            body = {"items": [base, PAIR]} if path == "/v1/judge/batch" else base
            content = json.dumps(body).encode().replace(b'"@@VALUE@@"', raw)
            calls.append(("POST", path, {"content": content,
                                         "headers": {**S.auth("tenant-a"), "Content-Type": "application/json"}}))
        for r, ((path, field), raw) in zip(check_many(app, "deep and wide", calls), drawn, strict=True):
            if field != "metadata" or r.status_code != 200:
                continue
            judged = r.json()["results"][0]["status"] == 200 if path == "/v1/judge/batch" else True
            if judged:  # then the metadata was within the limits
                assert raw.count(b"{") + raw.count(b"[") < 900, raw[:100]
                assert json_depth(json.loads(raw)) <= 32 and len(raw) <= 64 * 1024, raw[:100]

    run()


# --------------------------------------------------------------------------------- the total
def test_zz_total_generated_requests():
    """Runs last (file order): at least 10,000 requests when the whole module ran."""
    if COLLECT:
        print("\nFOUND:\n" + "\n\n".join(FOUND.values()))
    if len(SENT) < 13:
        pytest.skip(f"only part of the module ran: {dict(SENT)}")
    total = sum(SENT.values())
    print(f"\nfuzz: {total} requests; statuses {dict(sorted(STATUSES.items()))}; per test {dict(SENT)}")
    assert total >= 10_000, dict(SENT)
    assert not any(status >= 500 for status in STATUSES)

