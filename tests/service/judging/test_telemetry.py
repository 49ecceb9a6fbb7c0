"""OpenTelemetry from the gateway: with ``OTEL_EXPORTER_OTLP_ENDPOINT`` set, the real OTLP/HTTP
exporters send one ``gen_ai.evaluation.result`` event per verdict and a fan-out span with one
child per judge call to a receiver on loopback, decoded with the OTLP protobuf definitions;
without it nothing of the SDK is imported."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from jf_test_support.live_gateway import API_KEY, live_gateway
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from judgefuse.client import Client
from judgefuse.service.judging.telemetry import telemetry_from_environ


class Receiver(ThreadingHTTPServer):
    """An OTLP/HTTP collector stand-in: keeps each request body by path, answers 200."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def spans(self) -> list[Any]:
        found = []
        for body in self.bodies.get("/v1/traces", []):
            request = ExportTraceServiceRequest.FromString(body)
            found += [span for rs in request.resource_spans for ss in rs.scope_spans for span in ss.spans]
        return found

    def events(self) -> list[Any]:
        found = []
        for body in self.bodies.get("/v1/logs", []):
            request = ExportLogsServiceRequest.FromString(body)
            found += [rec for rl in request.resource_logs for sl in rl.scope_logs for rec in sl.log_records]
        return found


class _Handler(BaseHTTPRequestHandler):
    server: Receiver

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.server.lock:
            self.server.bodies.setdefault(self.path, []).append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def value(v: AnyValue) -> Any:
    return getattr(v, v.WhichOneof("value"))


def attrs(item: Any) -> dict[str, Any]:
    return {kv.key: value(kv.value) for kv in item.attributes}


def test_verdicts_send_evaluation_events_and_judge_spans(tmp_path: Path, receiver: Receiver,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "judgefuse-under-test")
    with live_gateway(tmp_path) as live, Client(live.url, API_KEY) as client:
        live.script.set("j3", "B", 60)
        judged = client.judge(question="What is 2 + 2?", answer_a="4", answer_b="5")
        fused = client.fuse(question="q", answer_a="a", answer_b="b", panel="ext",
                            votes=[{"judge": "e1", "choice": "B", "confidence": 0.8},
                                   {"judge": "e2", "choice": "B", "confidence": 0.7}])
        telemetry = live.gateway.judging.telemetry
        assert telemetry is not None
        telemetry.flush()
    events = {attrs(e)["judgefuse.verdict.id"]: e for e in receiver.events()}
    assert set(events) == {judged.id, fused.id}  # one event per verdict
    event = events[judged.id]
    assert event.event_name == "gen_ai.evaluation.result"
    fields = attrs(event)
    assert fields["gen_ai.evaluation.name"] == "judgefuse.pairwise"
    assert fields["gen_ai.evaluation.score.label"] == judged.choice == "A"
    assert fields["gen_ai.evaluation.score.value"] == pytest.approx(judged.confidence)
    assert fields["judgefuse.panel"] == "main" and fields["judgefuse.method"] == judged.method
    assert fields["judgefuse.route"] == judged.route
    assert "2 of 3 valid votes" in fields["gen_ai.evaluation.explanation"]
    assert attrs(events[fused.id])["gen_ai.evaluation.score.label"] == "B"

    spans = receiver.spans()
    fan_out = [s for s in spans if s.name == "judge_panel main"]
    assert len(fan_out) == 1  # posted votes (/v1/fuse) call no judge: no span
    assert attrs(fan_out[0])["judgefuse.verdict.id"] == judged.id
    calls = [s for s in spans if s.parent_span_id == fan_out[0].span_id]
    assert sorted(s.name for s in calls) == ["chat openai/j1", "chat openai/j2", "chat openai/j3"]
    for call in calls:
        a = attrs(call)
        assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
        assert (a["gen_ai.usage.input_tokens"], a["gen_ai.usage.output_tokens"]) == (12, 1)  # the stub's usage
        assert a["judgefuse.judge.latency_s"] > 0 and a["judgefuse.judge.calls"] == 1
        assert "judgefuse.judge.cost_usd" in a
        assert call.start_time_unix_nano >= fan_out[0].start_time_unix_nano
        assert call.end_time_unix_nano <= fan_out[0].end_time_unix_nano + 5_000_000
    assert {attrs(c)["judgefuse.judge.name"]: attrs(c)["judgefuse.vote.choice"] for c in calls} == {
        "j1": "A", "j2": "A", "j3": "B"}
    assert event.span_id == fan_out[0].span_id and event.trace_id == fan_out[0].trace_id
    resource = ExportTraceServiceRequest.FromString(receiver.bodies["/v1/traces"][0]).resource_spans[0].resource
    assert attrs(resource)["service.name"] == "judgefuse-under-test"


def test_off_by_default_and_the_sdk_is_not_imported() -> None:
    assert telemetry_from_environ({}) is None
    assert telemetry_from_environ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                   "OTEL_SDK_DISABLED": "true"}) is None
    assert telemetry_from_environ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                   "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}) is None
    code = ("import sys, os\n"
            "[os.environ.pop(k) for k in list(os.environ) if k.startswith('OTEL_')]\n"
            "from judgefuse.service.judging.telemetry import telemetry_from_environ\n"
            "import judgefuse.service.app\n"
            "assert telemetry_from_environ(os.environ) is None\n"
            "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
