"""Routing: which threshold applies to a verdict, and which route it takes (docs/design.md,
'Routing and threshold tuning'). Every routing decision of the service is made here.

**Which threshold.** A threshold is tuned for one fusion method and, for a learned one, one
model version. A refit that promotes a model also tunes a threshold for it (on the same labels,
from cross-fitted confidences) and stores the two as one
:class:`~judgefuse.service.storage.ModelRecord` (the threshold embedded, and also kept as its own
threshold version for the history). So a verdict is routed by (:func:`routing_threshold`):

1. the latest threshold record of (tenant, panel) when it applies to the verdict (tuned for its
   method and model version: e.g. an operator's retune, or a "review everything" record);
2. else the threshold promoted with the verdict's model, when it is that model's verdict;
3. else the latest record anyway, and routing says why it does not apply ("retune").

Rule 2 is what keeps the loop routing (docs/design.md, 'Learning keeps routing'): without it,
every promotion would switch auto-accept off until someone retuned by hand (the latest
threshold names the previous model).

**Which route** (:func:`route_verdict`). ``auto_accept`` iff the threshold applies to the
verdict and ``confidence >= threshold``; a "review everything" record, no record, or an
undecided verdict send it to ``human_review``. The returned :class:`ThresholdUsed` always says
why, in words (``reason``) and as one word (``code``: the review queue's ``reason``).

**Drift** (:func:`drift_route`). While the precision monitor of the routing threshold version is
in alarm (:mod:`judgefuse.service.monitoring.monitor`), the panel's ``on_drift`` turns an
auto-accept into human review with code ``drift_alarm`` (``review_everything``; with
``raise_threshold`` only below the threshold raised halfway to 1); ``alert_only`` and every
other route are left as they are.

**Cascades** (:func:`cascade_route`) route their own verdicts: a stage that accepted ->
``auto_accept`` under the stage thresholds of the panel file, none -> ``human_review``
(:mod:`judgefuse.service.judging.cascade_serving`). The stored threshold is not used for them.

:class:`Router` puts these together for a new verdict: the cascade's own rule, or the
threshold that applies, the route, and the drift override.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from judgefuse.fusion.cascade import CascadeDecision
from judgefuse.fusion.verdict import Verdict, is_tie
from judgefuse.service.kernel.panels import PanelRuntime
from judgefuse.service.monitoring.monitor import DRIFT_ALARM, Alarm, raised_threshold
from judgefuse.service.schemas import ThresholdUsed
from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = [
    "Router",
    "cascade_route",
    "drift_route",
    "route_verdict",
    "routing_threshold",
    "threshold_applies",
]


class RoutingState(Protocol):
    """Where the router reads the serving state of (tenant, panel) (a cached store read)."""

    async def threshold(self, tenant: str, panel: str) -> ThresholdRecord | None: ...

    async def model(self, tenant: str, panel: str) -> tuple[ModelRecord, Any] | None: ...


class Alarms(Protocol):
    """Where the router reads a threshold version's live drift alarm."""

    async def alarm(self, tenant: str, panel: str, threshold_version: int | None) -> Alarm | None: ...


class Router:
    """The route of a new verdict and the threshold used (module docstring)."""

    def __init__(self, state: RoutingState, alarms: Alarms) -> None:
        self.state = state
        self.alarms = alarms

    async def route(
        self, tenant: str, runtime: PanelRuntime, verdict: Verdict, *,
        cascade: CascadeDecision | None = None,
    ) -> tuple[str, ThresholdUsed]:
        """(route, the threshold used and why) of ``verdict``; ``cascade``: the walk that
        decided it, when the panel's cascade did."""
        if cascade is not None:
            return cascade_route(runtime, cascade)
        record = await self.threshold_for(tenant, runtime.name, verdict)
        route, used = route_verdict(verdict, record, panel=runtime.name)
        if route != "auto_accept":
            return route, used
        alarm = await self.alarms.alarm(tenant, runtime.name, used.version)
        return drift_route(verdict, used, alarm, runtime.panel.config.on_drift)

    async def threshold_for(self, tenant: str, panel: str, verdict: Verdict) -> ThresholdRecord | None:
        """The threshold record that routes ``verdict``: the latest one when it applies, else
        the one promoted with the verdict's model (:func:`routing_threshold`)."""
        latest = await self.state.threshold(tenant, panel)
        model = await self.state.model(tenant, panel) if verdict.model_version is not None else None
        return routing_threshold(latest, model[0] if model is not None else None, verdict)


def threshold_applies(record: ThresholdRecord, verdict: Verdict) -> bool:
    """Whether ``record`` was tuned for ``verdict``'s method (and model version, if any)."""
    if record.method != verdict.method:
        return False
    wanted = record.details.get("model_version")
    return not wanted or wanted == verdict.model_version


def routing_threshold(
    latest: ThresholdRecord | None, model: ModelRecord | None, verdict: Verdict
) -> ThresholdRecord | None:
    """The threshold record that routes ``verdict`` (rules in the module docstring). Pure."""
    if latest is not None and threshold_applies(latest, verdict):
        return latest
    paired = model.threshold if model is not None else None
    if (
        paired is not None
        and verdict.method == model.method  # type: ignore[union-attr]
        and verdict.model_version == model.params.get("model_version")  # type: ignore[union-attr]
    ):
        return paired
    return latest


def route_verdict(
    verdict: Verdict, record: ThresholdRecord | None, *, panel: str
) -> tuple[str, ThresholdUsed]:
    """(route, the threshold used and why). Pure."""
    if record is None:
        return "human_review", ThresholdUsed(
            value=None, version=None, code="no_threshold",
            reason=f"no threshold tuned for panel {panel!r} (POST /v1/thresholds/tune): "
                   "every verdict goes to human review",
        )
    used: dict[str, Any] = {"value": record.threshold, "version": record.version, "method": record.method}
    if record.details.get("review_everything"):
        return "human_review", ThresholdUsed(
            **{**used, "value": None}, code="review_everything",
            reason=f"threshold version {record.version} says review everything: "
                   f"{record.details.get('reason', 'no threshold met the target')}",
        )
    if record.method != verdict.method:
        return "human_review", ThresholdUsed(
            **used, code="method_mismatch",
            reason=f"threshold version {record.version} was tuned for method "
                           f"{record.method!r}, this verdict is {verdict.method!r}: retune",
        )
    wanted_version = record.details.get("model_version")
    if wanted_version and wanted_version != verdict.model_version:
        return "human_review", ThresholdUsed(
            **used, code="model_mismatch",
            reason=f"threshold version {record.version} was tuned for model "
                           f"{wanted_version}, this verdict is {verdict.model_version}: retune",
        )
    if verdict.choice is None:  # no usable vote, or an exact tie: never auto-accepted, whatever the threshold
        reason = "exact tie: neither answer preferred" if is_tie(verdict) else "undecided verdict"
        return "human_review", ThresholdUsed(**used, code="undecided", reason=reason)
    if verdict.confidence >= record.threshold:
        return "auto_accept", ThresholdUsed(
            **used, code="above_threshold", reason=f"confidence {verdict.confidence:.4f} >= threshold {record.threshold:.4f}"
        )
    return "human_review", ThresholdUsed(
        **used, code="below_threshold", reason=f"confidence {verdict.confidence:.4f} < threshold {record.threshold:.4f}"
    )


def drift_route(
    verdict: Verdict, used: ThresholdUsed, alarm: Alarm | None,
    on_drift: Literal["review_everything", "raise_threshold", "alert_only"],
) -> tuple[str, ThresholdUsed]:
    """The route of a verdict that ``used`` auto-accepts, under the panel's ``on_drift`` while
    ``alarm`` (of the routing threshold version) is live (module docstring). Pure."""
    if alarm is None or on_drift == "alert_only":
        return "auto_accept", used
    if on_drift == "raise_threshold" and used.value is not None:
        raised = raised_threshold(used.value)
        if verdict.confidence >= raised:
            return "auto_accept", used.model_copy(update={"reason": (
                f"confidence {verdict.confidence:.4f} >= raised threshold {raised:.4f} "
                f"({alarm.reason('threshold raised halfway to 1')})")})
        return "human_review", used.model_copy(update={
            "code": DRIFT_ALARM, "reason": f"confidence {verdict.confidence:.4f} < raised "
            f"threshold {raised:.4f}: {alarm.reason('threshold raised halfway to 1')}"})
    return "human_review", used.model_copy(update={
        "code": DRIFT_ALARM, "reason": alarm.reason("every verdict goes to human review")})


def cascade_route(runtime: PanelRuntime, decision: CascadeDecision) -> tuple[str, ThresholdUsed]:
    """The cascade routes its own verdict: accepted by a stage -> auto_accept, else review."""
    assert runtime.cascade is not None
    stages = runtime.cascade.all_stages()
    verdict = decision.verdict
    if decision.stage is not None:
        stage = stages[decision.stage]
        return "auto_accept", ThresholdUsed(
            value=stage.threshold, version=None, method="cascade", code="cascade_accepted",
            reason=f"cascade stage {decision.stage + 1}/{len(stages)} ({stage.name}) accepted: "
                   f"confidence {verdict.confidence:.4f} >= its threshold "
                   f"{stage.threshold:.4f} (panel file)",
        )
    return "human_review", ThresholdUsed(
        value=None, version=None, method="cascade", code="cascade",
        reason=f"cascade: none of the {len(stages)} stage(s) accepted"
               + (" (the full panel included)" if runtime.cascade.fallback == "panel" else "")
               + ": human review",
    )
