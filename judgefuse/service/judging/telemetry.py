"""OpenTelemetry from the gateway: one evaluation event per verdict and the judge fan-out as
spans (docs/design.md, 'Serving'; the user's page is docs/opentelemetry.md).

Off unless the standard variables ask for it: an OTLP endpoint
(``OTEL_EXPORTER_OTLP_ENDPOINT``, or ``..._TRACES_ENDPOINT`` / ``..._LOGS_ENDPOINT``) and not
``OTEL_SDK_DISABLED=true``; ``OTEL_TRACES_EXPORTER=none`` / ``OTEL_LOGS_EXPORTER=none`` turn one
signal off. Everything else (headers, timeouts, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, batch delays) is read by the OpenTelemetry SDK itself. Off, the
pipeline holds ``None`` and pays one ``is not None`` per verdict; ``opentelemetry.sdk`` and the
exporters are imported only when on (the ``otel`` extra).

What is sent, after each verdict is stored (so no judge call waits on it):

* a span ``judge_panel {panel}`` around the fan-out (the time the judges took), with one child
  ``chat {model}`` per judge call following the GenAI conventions (``gen_ai.operation.name``,
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` / ``output_tokens``) plus the judge's
  name, mode, latency, calls, cost and vote. The spans are recorded when the verdict is done,
  with the times the pipeline measured (all judges start with the fan-out: they run at once);
  posted votes (``/v1/fuse``) call no judge and get no span;
* the event ``gen_ai.evaluation.result`` (a log record, parented to the fan-out span when there
  is one): ``gen_ai.evaluation.name`` ``judgefuse.pairwise``, ``gen_ai.evaluation.score.value``
  the fused, calibrated confidence in the choice, ``gen_ai.evaluation.score.label`` the choice
  (``A``, ``B`` or ``undecided``), ``gen_ai.evaluation.explanation`` a sentence on the votes and
  the route; and ``judgefuse.verdict.id``, ``.panel``, ``.method``, ``.route``, ``.p_a``.

Exporting is the SDK's batch processors' job (a thread of theirs), off the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.kernel.panels import PanelRuntime

__all__ = ["EVALUATION_EVENT", "VerdictTelemetry", "telemetry_from_environ"]

log = logging.getLogger("judgefuse.service")

EVALUATION_EVENT = "gen_ai.evaluation.result"
EVALUATION_NAME = "judgefuse.pairwise"
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
              "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")


def _wanted(environ: Mapping[str, str], signal: str) -> bool:
    if environ.get(f"OTEL_{signal}_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                or environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))


def telemetry_from_environ(environ: Mapping[str, str]) -> VerdictTelemetry | None:
    """The exporter the ``OTEL_*`` variables ask for, or None (off: nothing imported)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(environ.get(name) for name in _ENDPOINTS):
        return None
    traces, logs = _wanted(environ, "TRACES"), _wanted(environ, "LOGS")
    if not (traces or logs):
        return None
    try:
        return VerdictTelemetry.build(traces=traces, logs=logs)
    except ImportError as exc:
        log.warning("OpenTelemetry asked for (OTEL_EXPORTER_OTLP_*) but not installed (%s): "
                    "pip install 'judgefuse[otel]'; no telemetry is sent", exc.name)
        return None


class VerdictTelemetry:
    """Spans and evaluation events for verdicts (module docstring). ``tracer`` and ``logger``
    are OpenTelemetry's (None: that signal is off)."""

    def __init__(self, tracer: Any, logger: Any, providers: Sequence[Any] = ()) -> None:
        self.tracer = tracer
        self.logger = logger
        self.providers = list(providers)

    @classmethod
    def build(cls, *, traces: bool, logs: bool) -> VerdictTelemetry:
        """Providers with OTLP/HTTP exporters and batch processors, configured by the SDK from
        the environment (endpoint, headers, ``OTEL_SERVICE_NAME``...)."""
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource

        from judgefuse import __version__

        resource = Resource.create({"service.name": "judgefuse", "service.version": __version__}).merge(
            OTELResourceDetector().detect())
        tracer = logger = None
        providers: list[Any] = []
        if traces:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            tracer_provider = TracerProvider(resource=resource)
            tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            tracer = tracer_provider.get_tracer("judgefuse", __version__)
            providers.append(tracer_provider)
        if logs:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

            logger_provider = LoggerProvider(resource=resource)
            logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
            logger = logger_provider.get_logger("judgefuse", __version__)
            providers.append(logger_provider)
        return cls(tracer, logger, providers)

    def verdict(self, tenant: str, runtime: PanelRuntime, votes: Sequence[JudgeVote],
                verdict: Verdict, *, judged: bool) -> None:
        """Record one stored verdict; ``judged``: its votes came from judge calls (not posted)."""
        try:
            panel = runtime.name
            span_context = None
            if judged and self.tracer is not None:
                models = {j.name: j.config.model or j.name for j in runtime.panel.judges}
                span_context = self._spans(panel, models, votes, verdict)
            if self.logger is not None:
                self._event(tenant, panel, votes, verdict, span_context)
        except Exception as exc:  # telemetry never fails a verdict
            log.warning("telemetry: verdict %s not recorded: %s", verdict.id, type(exc).__name__)

    def _spans(self, panel: str, models: Mapping[str, str], votes: Sequence[JudgeVote],
               verdict: Verdict) -> Any:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        now = time.time_ns()
        timings = verdict.timings
        start = now - int(timings.get("total_s", 0.0) * 1e9)
        end = start + int(timings.get("judges_s", 0.0) * 1e9)
        fan_out = self.tracer.start_span(f"judge_panel {panel}", start_time=start, attributes={
            "judgefuse.panel": panel, "judgefuse.verdict.id": verdict.id or "",
            "judgefuse.method": verdict.method, "judgefuse.judges": len(votes),
            "judgefuse.valid_votes": verdict.n_valid,
        })
        context = trace.set_span_in_context(fan_out)
        for vote in votes:
            model = models.get(vote.judge, vote.judge)
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                "gen_ai.usage.input_tokens": vote.prompt_tokens,
                "gen_ai.usage.output_tokens": vote.completion_tokens,
                "judgefuse.judge.name": vote.judge, "judgefuse.judge.mode": vote.mode,
                "judgefuse.judge.calls": vote.calls, "judgefuse.judge.latency_s": vote.latency_s,
                "judgefuse.judge.cost_usd": vote.cost_usd,
            }
            if "/" in model:
                attributes["gen_ai.provider.name"] = model.split("/", 1)[0]
            if vote.choice is not None:
                attributes["judgefuse.vote.choice"] = vote.choice
            if vote.confidence is not None:
                attributes["judgefuse.vote.confidence"] = vote.confidence
            call = self.tracer.start_span(f"chat {model}", context=context, start_time=start,
                                          attributes=attributes)
            if vote.error:
                call.set_attribute("error.type", vote.error.split(":", 1)[0][:64])
                call.set_status(Status(StatusCode.ERROR))
            call.end(end_time=start + int(vote.latency_s * 1e9))
        fan_out.end(end_time=end)
        return context

    def _event(self, tenant: str, panel: str, votes: Sequence[JudgeVote], verdict: Verdict,
               context: Any) -> None:
        label = verdict.choice or "undecided"
        valid = [v for v in votes if v.valid]
        for_choice = sum(1 for v in valid if v.choice == verdict.choice)
        explanation = (
            f"{for_choice} of {len(valid)} valid votes ({len(votes)} judges) chose {label}; "
            f"fused by {verdict.method} to confidence {verdict.confidence:.3f}; "
            f"routed to {verdict.route or 'human_review'}"
        )
        attributes: dict[str, Any] = {
            "gen_ai.evaluation.name": EVALUATION_NAME,
            "gen_ai.evaluation.score.value": float(verdict.confidence),
            "gen_ai.evaluation.score.label": label,
            "gen_ai.evaluation.explanation": explanation,
            "judgefuse.verdict.id": verdict.id or "", "judgefuse.panel": panel,
            "judgefuse.method": verdict.method, "judgefuse.route": verdict.route or "human_review",
            "judgefuse.p_a": float(verdict.p_a), "judgefuse.tenant": tenant,
        }
        if verdict.model_version:
            attributes["judgefuse.model_version"] = verdict.model_version
        self.logger.emit(event_name=EVALUATION_EVENT, attributes=attributes, context=context,
                         body=explanation)

    def flush(self, timeout_ms: int = 10_000) -> None:
        for provider in self.providers:
            provider.force_flush(timeout_ms)

    def shutdown(self) -> None:
        for provider in self.providers:
            provider.shutdown()
