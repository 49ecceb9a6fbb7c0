"""Prometheus metrics, one registry per app (never the global default registry).

Series (all prefixed ``judgefuse_``):

* ``http_request_duration_seconds`` histogram {method, route, status}
* ``judge_latency_seconds`` histogram {panel, judge}; ``judge_votes_total`` {panel, judge, outcome}
  (``valid``/``invalid``); ``judge_errors_total`` {panel, judge}
* ``verdicts_total`` {tenant, panel, method, route}; ``quorum_lost_total`` {panel};
  ``gateway_overhead_seconds`` histogram (verdict time minus the slowest judge call)
* ``labels_total`` {tenant, panel, status}; ``refits_total`` {tenant, panel, outcome}
* cost per judge: ``judge_calls_total`` {panel, judge}, ``judge_tokens_total``
  {panel, judge, kind=prompt|completion}, ``judge_cost_usd_total`` {panel, judge} (every vote
  drawn, including those of requests refused for lack of quorum)
* cost per verdict: ``verdict_cost_usd`` histogram {tenant, panel} (``_sum`` = the panel's
  money, ``_count`` = its verdicts), ``verdict_calls`` histogram {tenant, panel}
* cascades: ``cascade_decisions_total`` {panel, stage} (stage = the accepting stage's 1-based
  index and name, e.g. ``2:j2``, or ``review``)
* admission: ``admission_rejected_total`` {tenant, limit} (429s before any judge call),
  ``requests_inflight`` {tenant}; ``report_reads_total`` {tenant, report, outcome} (reports
  over stored verdicts computed, answered from their cache, or refused:
  :mod:`judgefuse.service.estimates.reports`); circuit breakers (refreshed on scrape):
  ``circuit_opened`` {panel, judge} (times opened, this process), ``circuit_open`` {panel, judge}
  (1 while open or half-open)
* ``event_loop_lag_seconds`` histogram: how late a timer set 5 ms ahead fired, sampled all the
  time (:mod:`judgefuse.service.kernel.loop_lag`; also what backpressure sheds on)
* ``calibration_ece``, ``calibration_th_score``, ``calibration_labels`` gauges
  {tenant, panel, key}: refreshed from storage on every scrape of ``/metrics``.

Counters are per process (a replica's own traffic); calibration gauges read shared storage.

Who sees what (``GET /metrics``, see :mod:`judgefuse.service.web.auth`): the operator's metrics
token reads every series; a tenant key reads :meth:`ServiceMetrics.render_for_tenant`, only the
series labelled with its own tenant (verdicts, labels, refits, cost per verdict, calibration).
Series without a tenant label (judges, HTTP latency, overhead, cascades) sum every tenant's
traffic and are the operator's only; the dashboard shows a tenant its own judge figures from
the per-tenant tallies kept here (``tenant_judge_*``, ``tenant_cascade_counts``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

from judgefuse.fusion.cascade import vote_calls
from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import JudgeVote
from judgefuse.service.kernel.loop_lag import LoopLag
from judgefuse.service.kernel.sojourn import Sojourn, Working

__all__ = ["ServiceMetrics"]

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
OVERHEAD_BUCKETS = (0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 1)
COST_BUCKETS = (0.0, 1e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0)
CALLS_BUCKETS = (0, 1, 2, 3, 4, 5, 8, 10, 15, 20, 30, 50, 100)
LOOP_LAG_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def _zero_cost(count: str = "verdicts") -> dict[str, float]:
    return {count: 0, "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "usd": 0.0}


def _add_vote_cost(tally: dict[str, float], calls: int, prompt_tokens: int, completion_tokens: int,
                   usd: float) -> None:
    """One vote into a ``_zero_cost("votes")`` tally."""
    tally["votes"] += 1
    tally["calls"] += calls
    tally["prompt_tokens"] += prompt_tokens
    tally["completion_tokens"] += completion_tokens
    tally["usd"] += usd


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.http_latency = Histogram(
            "judgefuse_http_request_duration_seconds", "HTTP request latency",
            ("method", "route", "status"), registry=r, buckets=LATENCY_BUCKETS)
        self.judge_latency = Histogram(
            "judgefuse_judge_latency_seconds", "Latency of one judge's vote",
            ("panel", "judge"), registry=r, buckets=LATENCY_BUCKETS)
        self.judge_votes = Counter(
            "judgefuse_judge_votes", "Votes per judge by outcome",
            ("panel", "judge", "outcome"), registry=r)
        self.judge_errors = Counter(
            "judgefuse_judge_errors", "Invalid votes (errors, timeouts, unreadable output) per judge",
            ("panel", "judge"), registry=r)
        self.verdicts = Counter(
            "judgefuse_verdicts", "Verdicts by route", ("tenant", "panel", "method", "route"),
            registry=r)
        self.quorum_lost = Counter(
            "judgefuse_quorum_lost", "Requests refused for lack of quorum", ("panel",), registry=r)
        self.overhead = Histogram(
            "judgefuse_gateway_overhead_seconds",
            "Verdict wall time minus the slowest judge call", registry=r, buckets=OVERHEAD_BUCKETS)
        self.labels = Counter(
            "judgefuse_labels", "Feedback labels by outcome", ("tenant", "panel", "status"),
            registry=r)
        self.refits = Counter(
            "judgefuse_refits", "Learned-fusion refits by outcome", ("tenant", "panel", "outcome"),
            registry=r)
        self.cal_ece = Gauge(
            "judgefuse_calibration_ece", "ECE per calibration key (all time)",
            ("tenant", "panel", "key"), registry=r)
        self.cal_th = Gauge(
            "judgefuse_calibration_th_score", "TH-Score per calibration key (all time)",
            ("tenant", "panel", "key"), registry=r)
        self.cal_n = Gauge(
            "judgefuse_calibration_labels", "Labelled items per calibration key",
            ("tenant", "panel", "key"), registry=r)
        self.monitor_alarm = Gauge(
            "judgefuse_monitor_alarm",
            "1 while the precision monitor of the current threshold version is in alarm",
            ("tenant", "panel"), registry=r)
        self.monitor_lower = Gauge(
            "judgefuse_monitor_precision_lower",
            "Anytime-valid lower bound of the auto-accept precision (audit labels)",
            ("tenant", "panel"), registry=r)
        self.monitor_upper = Gauge(
            "judgefuse_monitor_precision_upper",
            "Anytime-valid upper bound of the auto-accept precision (alarm when below target)",
            ("tenant", "panel"), registry=r)
        self.monitor_target = Gauge(
            "judgefuse_monitor_precision_target", "Target precision of the current threshold",
            ("tenant", "panel"), registry=r)
        self.monitor_labels = Gauge(
            "judgefuse_monitor_labels", "Audit labels in the current threshold version's monitor",
            ("tenant", "panel"), registry=r)
        self.judge_drift = Gauge(
            "judgefuse_judge_drift_alarm",
            "1 when a judge's Brier score (audit labels) or vote distribution (per replica) moved",
            ("tenant", "panel", "judge", "signal"), registry=r)
        self.judge_calls = Counter(
            "judgefuse_judge_calls", "Model calls per judge", ("panel", "judge"), registry=r)
        self.judge_tokens = Counter(
            "judgefuse_judge_tokens", "Tokens per judge, prompt or completion",
            ("panel", "judge", "kind"), registry=r)
        self.judge_cost = Counter(
            "judgefuse_judge_cost_usd", "Money spent per judge (USD, litellm prices)",
            ("panel", "judge"), registry=r)
        self.verdict_cost = Histogram(
            "judgefuse_verdict_cost_usd", "Money per verdict (USD): the sum over its votes",
            ("tenant", "panel"), registry=r, buckets=COST_BUCKETS)
        self.verdict_calls = Histogram(
            "judgefuse_verdict_calls", "Model calls per verdict", ("tenant", "panel"),
            registry=r, buckets=CALLS_BUCKETS)
        self.cascade_decisions = Counter(
            "judgefuse_cascade_decisions", "Cascade verdicts by deciding stage (or review)",
            ("panel", "stage"), registry=r)
        self.admission_rejected = Counter(
            "judgefuse_admission_rejected", "Requests refused with 429 before any judge call, by limit",
            ("tenant", "limit"), registry=r)
        self.report_reads = Counter(
            "judgefuse_report_reads",
            "Reports over stored verdicts by outcome: computed, cached (no scan) or refused (429)",
            ("tenant", "report", "outcome"), registry=r)
        self.requests_inflight = Gauge(
            "judgefuse_requests_inflight", "Judge requests admitted and not yet answered",
            ("tenant",), registry=r)
        self.circuit_opened = Gauge(
            "judgefuse_circuit_opened", "Times a judge's circuit breaker has opened (this process)",
            ("panel", "judge"), registry=r)
        self.circuit_open = Gauge(
            "judgefuse_circuit_open", "1 while a judge's circuit is open or half-open",
            ("panel", "judge"), registry=r)
        self.loop_lag_seconds = Histogram(
            "judgefuse_event_loop_lag_seconds",
            "How late a timer set 5 ms ahead fired on the event loop (sampled every 5 ms)",
            registry=r, buckets=LOOP_LAG_BUCKETS)
        self.loop_lag = LoopLag(self.loop_lag_seconds, interval_s=0.005, window_s=0.1)
        """The sampler (started by the app's lifespan); backpressure reads it."""
        self.sojourn = Sojourn(window_s=0.1)
        """Verdicts' in-app time per window (the judging pipeline feeds it); backpressure reads it."""
        self.working = Working()
        """Judging requests doing the gateway's own work now (backpressure counts them, the
        pipeline steps them out while their judges are called)."""
        # routing counts kept as plain numbers too, for the dashboard
        self.route_counts: dict[tuple[str, str], dict[str, int]] = {}
        self.judge_health: dict[tuple[str, str], dict[str, int]] = {}
        self._judge_children: dict[tuple[str, str], tuple[Any, ...]] = {}
        self.judge_cost_totals: dict[tuple[str, str], dict[str, float]] = {}
        """(panel, judge) -> votes, calls, prompt/completion tokens, usd (this process)."""
        self.panel_cost_totals: dict[tuple[str, str], dict[str, float]] = {}
        """(tenant, panel) -> verdicts, calls, prompt/completion tokens, usd (this process)."""
        self.cascade_counts: dict[str, dict[str, int]] = {}
        """panel -> deciding stage label ("1:j1", ..., "review") -> verdicts (this process)."""
        self.tenant_judge_health: dict[tuple[str, str, str], dict[str, int]] = {}
        """(tenant, panel, judge) -> valid/invalid votes drawn for that tenant (this process)."""
        self.tenant_judge_cost: dict[tuple[str, str, str], dict[str, float]] = {}
        """(tenant, panel, judge) -> votes, calls, tokens, usd for that tenant (this process)."""
        self.tenant_cascade_counts: dict[tuple[str, str], dict[str, int]] = {}
        """(tenant, panel) -> deciding stage label -> verdicts (this process)."""
        self._bound: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, bound once and kept: prometheus_client's ``labels`` checks
        the values and takes the metric's lock on every call; a hit here is one dict lookup.
        (Series are never removed from this registry, so a kept child never goes stale.)"""
        key = (id(metric), labels)
        found = self._bound.get(key)
        if found is None:
            found = self._bound[key] = metric.labels(*labels)
        return found

    def observe_verdict(self, tenant: str, panel: str, verdict: Verdict,
                        cascade_stage: str | None = None) -> None:
        """Count a verdict, its route and its cost (the sum over its votes); ``cascade_stage``
        labels a cascade verdict's deciding stage (``"2:j2"`` or ``"review"``)."""
        route = verdict.route or "human_review"
        self.child(self.verdicts, tenant, panel, verdict.method, route).inc()
        counts = self.route_counts.setdefault((tenant, panel), {"auto_accept": 0, "human_review": 0})
        counts[route] = counts.get(route, 0) + 1
        calls = sum(vote_calls(v) for v in verdict.votes)
        prompt = sum(v.prompt_tokens for v in verdict.votes)
        completion = sum(v.completion_tokens for v in verdict.votes)
        usd = math.fsum(v.cost_usd for v in verdict.votes)
        self.child(self.verdict_cost, tenant, panel).observe(usd)
        self.child(self.verdict_calls, tenant, panel).observe(calls)
        totals = self.panel_cost_totals.setdefault((tenant, panel), _zero_cost())
        totals["verdicts"] += 1
        totals["calls"] += calls
        totals["prompt_tokens"] += prompt
        totals["completion_tokens"] += completion
        totals["usd"] += usd
        if cascade_stage is not None:
            self.child(self.cascade_decisions, panel, cascade_stage).inc()
            for stages in (self.cascade_counts.setdefault(panel, {}),
                           self.tenant_cascade_counts.setdefault((tenant, panel), {})):
                stages[cascade_stage] = stages.get(cascade_stage, 0) + 1

    def observe_votes(self, panel: str, votes: Sequence[JudgeVote], *, tenant: str | None = None) -> None:
        """Count each vote per judge; with ``tenant``, also in that tenant's own tallies."""
        for vote in votes:
            key = (panel, vote.judge)
            children = self._judge_children.get(key)
            if children is None:
                children = (
                    self.judge_latency.labels(panel, vote.judge),
                    self.judge_votes.labels(panel, vote.judge, "valid"),
                    self.judge_votes.labels(panel, vote.judge, "invalid"),
                    self.judge_votes.labels(panel, vote.judge, "tie"),
                    self.judge_errors.labels(panel, vote.judge),
                    self.judge_calls.labels(panel, vote.judge),
                    self.judge_tokens.labels(panel, vote.judge, "prompt"),
                    self.judge_tokens.labels(panel, vote.judge, "completion"),
                    self.judge_cost.labels(panel, vote.judge),
                )
                self._judge_children[key] = children
            latency, valid, invalid, tie, errors, calls, prompt, completion, cost = children
            # a tie vote is an answer, not an error (docs/design.md, 'Fusion'): its own outcome
            outcome = "valid" if vote.valid else "tie" if vote.tie else "invalid"
            latency.observe(vote.latency_s)
            n_calls = vote_calls(vote)
            prompt_tokens, completion_tokens, usd = vote.prompt_tokens, vote.completion_tokens, vote.cost_usd
            calls.inc(n_calls)
            prompt.inc(prompt_tokens)
            completion.inc(completion_tokens)
            cost.inc(usd)
            # the tallies below are looked up, not setdefault(key, {...}), which built three
            # dicts a vote: 44 -> 28 us for a five-vote verdict
            totals = self.judge_cost_totals.get(key)
            if totals is None:
                totals = self.judge_cost_totals[key] = _zero_cost("votes")
            _add_vote_cost(totals, n_calls, prompt_tokens, completion_tokens, usd)
            if tenant is not None:
                own_key = (tenant, panel, vote.judge)
                own = self.tenant_judge_cost.get(own_key)
                if own is None:
                    own = self.tenant_judge_cost[own_key] = _zero_cost("votes")
                _add_vote_cost(own, n_calls, prompt_tokens, completion_tokens, usd)
                own_health = self.tenant_judge_health.get(own_key)
                if own_health is None:
                    own_health = self.tenant_judge_health[own_key] = {"valid": 0, "invalid": 0, "tie": 0}
                own_health[outcome] += 1
            health = self.judge_health.get(key)
            if health is None:
                health = self.judge_health[key] = {"valid": 0, "invalid": 0, "tie": 0}
            health[outcome] += 1
            if outcome == "valid":
                valid.inc()
            elif outcome == "tie":
                tie.inc()
            else:
                invalid.inc()
                errors.inc()

    def set_circuits(self, judges: Iterable[tuple[str, str, Any]]) -> None:
        """Refresh the circuit gauges from (panel, judge name, breaker or None) triples."""
        for panel, judge, breaker in judges:
            if breaker is None:
                continue
            self.circuit_opened.labels(panel, judge).set(breaker.times_opened)
            self.circuit_open.labels(panel, judge).set(0 if breaker.state == "closed" else 1)

    def set_calibration(self, tenant: str, panel: str, key: str, metrics: dict[str, Any]) -> None:
        def value(x: Any) -> float:
            return float("nan") if x is None else float(x)

        self.cal_ece.labels(tenant, panel, key).set(value(metrics.get("ece")))
        self.cal_th.labels(tenant, panel, key).set(value(metrics.get("th_score")))
        n = metrics.get("n") or 0
        self.cal_n.labels(tenant, panel, key).set(0 if math.isnan(float(n)) else float(n))

    def set_monitor(self, tenant: str, panel: str, snapshot: dict[str, Any]) -> None:
        """Refresh the monitor gauges of (tenant, panel) from ``Monitors.snapshot``."""
        self.monitor_alarm.labels(tenant, panel).set(1 if snapshot["state"] == "alarm" else 0)
        precision = snapshot["precision"]
        self.monitor_lower.labels(tenant, panel).set(precision["lower"])
        self.monitor_upper.labels(tenant, panel).set(precision["upper"])
        self.monitor_labels.labels(tenant, panel).set(precision["labels"])
        target = snapshot.get("target")
        self.monitor_target.labels(tenant, panel).set(float("nan") if target is None else target)
        for judge, drift in snapshot.get("judges", {}).items():
            for signal in ("brier", "votes"):
                report = drift.get(signal)
                if report is not None:
                    self.judge_drift.labels(tenant, panel, judge, signal).set(
                        1 if report.get("alarm") else 0)

    def render(self) -> bytes:
        """Every series (the operator's view)."""
        return generate_latest(self.registry)

    def render_for_tenant(self, tenant: str) -> bytes:
        """Only the samples labelled ``tenant=<tenant>`` (a tenant's view)."""
        return generate_latest(_TenantSeries(self.registry, tenant))


class _TenantSeries:
    """A collector over ``registry`` that keeps one tenant's samples (families left empty are
    dropped), so a tenant's scrape names no other tenant and no cross-tenant total."""

    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
        self.registry = registry
        self.tenant = tenant

    def collect(self) -> Any:
        for family in self.registry.collect():
            samples = [s for s in family.samples if s.labels.get("tenant") == self.tenant]
            if samples:
                kept = Metric(family.name, family.documentation, family.type, family.unit)
                kept.samples = samples
                yield kept
