"""Guarantees that hold over time: the precision monitor and judge drift, as service state.

One :class:`~judgefuse.calibration.sequential.PrecisionMonitor` per (tenant, panel, threshold
version), fed by the first labels of ``audit``-stratum verdicts routed by that version (a random
sample of what it auto-accepted). Its target is the threshold record's ``target_precision``, its
alpha ``settings.monitoring.monitor_alpha``. It alarms when the upper confidence bound of the precision falls
below the target; the chance of that ever happening while the precision stays at or above the
target is at most alpha, however often it is read. A new threshold version starts a new monitor,
so a retune clears the alarm; ``POST /v1/monitor/clear`` clears it by hand (and restarts the
monitor: every restart is a fresh alpha-level sequence, so k clears spend at most k * alpha).

**Storage: a compare-and-set blob per key.** The monitor's state is a few dozen numbers
(``O(log labels)``), stored as one versioned JSON blob (``Storage.get_state``/``put_state``);
a label reads it, adds itself, and writes it back iff nobody wrote in between (else it rereads
and retries). So replicas sharing Redis never lose or double an update, the hot path of a label
is ``O(log t)`` and two round trips, and nothing is ever rebuilt from a log. The blob also holds
the per-judge :class:`~judgefuse.calibration.drift.BrierDrift` (fed by the same audit labels)
and the bound over time (the last :data:`SERIES_POINTS` labels) for the dashboard. So each
judge's Brier reference period is the first 200 audit labels after a tune: a retune also
restarts judge drift, against the calibration the new threshold was tuned on. Per label the
blob update costs ~5-8 ms of CPU (monitor, three judges' Brier detectors, JSON of ~20 kB at
most), labels arrive at human speed, and the verdict hot path never touches it.

**Relabels are ignored.** A sequential monitor consumes labels in arrival order and its state
is sums over restart windows; a relabel would have to rewrite a past observation in every
window holding it. Only a verdict's *first* label feeds the monitor (``LabelOutcome.status ==
"labelled"``, which storage reports exactly once per verdict), so a retried or corrected label
never counts twice. A correction still reaches the next tuning, which reads the labelled store.
A crash between the label and the blob write drops that one label from the monitor: which labels
are dropped does not depend on their value, so the guarantee is untouched.

**Action on alarm** (panel ``on_drift``): ``review_everything`` routes every new verdict of that
threshold version to human review with reason ``drift_alarm``; ``raise_threshold`` keeps
auto-accepting only at confidence >= ``t + (1 - t) / 2`` (the threshold moved halfway to 1: the
auto-accepted verdicts keep being audited, so the monitor goes on watching the narrower band),
the rest goes to review with reason ``drift_alarm``; ``alert_only`` changes no route. Each alarm
and clear is a :class:`~judgefuse.service.storage.MonitorEvent` (evidence: labels, bound, time;
the action), written once by the replica whose compare-and-set raised or cleared it.

**Vote drift is per replica.** A :class:`~judgefuse.calibration.drift.VoteDrift` per (tenant,
panel, judge) watches every verdict's votes in memory (no storage write on the request path);
each replica watches the traffic it serves (a random share of the whole behind a load balancer)
and restarts with the process. It costs one detector update per vote, ``O(log t)``: 50-180 us of
Python per vote here depending on load (so 0.15-0.5 ms per verdict of a 3-judge panel). Votes
could be summed into batches (:data:`VOTE_BATCH`; the batch means are still a [0, 1] stream with
the same mean under no drift, so the guarantee holds) to cut that, but the reference interval
widens with fewer observations: a share of "A" moving 0.5 -> 0.8 was flagged after 159 votes
unbatched and 324 in pairs (``min_level`` 5), never within 3,000 in batches of 8. So the default
is one vote per observation, the detector's own defaults (500 reference votes, restarts every
64).

Routing reads the alarm through a cache fresh for ``settings.learning.state_ttl_s`` (like thresholds):
the replica that raised or cleared an alarm sees it at once, the others within the TTL.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from judgefuse.calibration.drift import BrierDrift, VoteDrift
from judgefuse.calibration.sequential import PrecisionMonitor
from judgefuse.judges.types import JudgeVote, Letter
from judgefuse.service.settings import Settings
from judgefuse.service.storage import MonitorEvent, Storage, ThresholdRecord, VerdictRecord

__all__ = [
    "DRIFT_ALARM",
    "SERIES_POINTS",
    "Alarm",
    "Monitors",
    "monitor_key",
    "raised_threshold",
]

log = logging.getLogger("judgefuse.service")

VOTE_BATCH = 1
"""Votes per observation of the per-judge vote-drift detectors (see the module docstring)."""
VOTE_REFERENCE_BATCHES = 500
VOTE_MIN_LEVEL = 6
DRIFT_ALARM = "drift_alarm"
"""The routing code (and review stamp reason) of verdicts sent to review by an alarm."""
SERIES_POINTS = 240
"""How many (time, labels, estimate, lower, upper) points of the bound the blob keeps."""
MAX_CAS_ATTEMPTS = 50


def monitor_key(panel: str, threshold_version: int) -> str:
    """The state-blob key of (panel, threshold version)."""
    return f"monitor/{quote(panel, safe='')}/{int(threshold_version)}"


def raised_threshold(threshold: float) -> float:
    """``on_drift: raise_threshold``: the threshold moved halfway to 1."""
    return threshold + (1.0 - threshold) / 2.0


@dataclass(frozen=True)
class Alarm:
    """A live alarm of one (tenant, panel, threshold version)."""

    threshold_version: int
    at: float
    labels: int
    upper: float
    target: float

    def reason(self, action: str) -> str:
        return (f"precision monitor of threshold version {self.threshold_version} alarmed "
                f"({DRIFT_ALARM}) after {self.labels} audit labels: upper bound "
                f"{self.upper:.3f} < target {self.target:.3f}; {action} until a retune or "
                "POST /v1/monitor/clear")


def _finite(x: float) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def _new_blob(target: float, alpha: float, version: int) -> dict[str, Any]:
    return {"target": target, "alpha": alpha, "threshold_version": version,
            "precision": PrecisionMonitor(target, alpha=alpha).to_state(), "judges": {},
            "series": [], "alarm": None, "restarts": 0}


class Monitors:
    """The precision monitors, judge drift and alarm cache of one gateway."""

    def __init__(self, settings: Settings, storage: Storage, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.storage = storage
        self.clock = clock
        self._alarms: dict[tuple[str, str, int], tuple[Alarm | None, float]] = {}
        self.votes: dict[tuple[str, str, str], _BatchedVoteDrift] = {}

    # ------------------------------------------------------------------ hot path
    async def alarm(self, tenant: str, panel: str, threshold_version: int | None) -> Alarm | None:
        """The live alarm of the routing threshold version, through a ``state_ttl_s`` cache."""
        if threshold_version is None:
            return None
        key = (tenant, panel, int(threshold_version))
        hit = self._alarms.get(key)
        if hit is not None and time.monotonic() - hit[1] <= self.settings.learning.state_ttl_s:
            return hit[0]
        blob = await self.storage.get_state(tenant, monitor_key(panel, threshold_version))
        alarm = _alarm_of(blob.body if blob else None)
        self._alarms[key] = (alarm, time.monotonic())
        return alarm

    def observe_votes(self, tenant: str, panel: str, votes: Sequence[JudgeVote]) -> None:
        """Feed every vote to its judge's label-free :class:`VoteDrift` (in memory)."""
        for vote in votes:
            key = (tenant, panel, vote.judge)
            drift = self.votes.get(key)
            if drift is None:
                drift = self.votes[key] = _BatchedVoteDrift(self.settings.monitoring.monitor_alpha)
            drift.add(vote.choice, vote.confidence)

    # ------------------------------------------------------------------ labels
    async def on_label(
        self, tenant: str, record: VerdictRecord, label: Letter, threshold: ThresholdRecord | None,
        *, on_drift: str,
    ) -> MonitorEvent | None:
        """Feed one first label of an audit verdict to its threshold version's monitor (and its
        judges' Brier drift); returns the alarm event when this label raised it."""
        stamp = record.review
        if (stamp is None or stamp.stratum != "audit" or record.threshold_version is None
                or threshold is None or threshold.target_precision is None
                or not 0.0 < threshold.target_precision < 1.0):
            return None
        correct = record.verdict.choice == label
        judged = [(v.judge, float(v.confidence), v.choice == label)
                  for v in record.verdict.votes
                  if v.valid and v.choice is not None and v.confidence is not None]
        key = monitor_key(record.panel, record.threshold_version)
        for _ in range(MAX_CAS_ATTEMPTS):
            blob = await self.storage.get_state(tenant, key)
            body = blob.body if blob is not None else _new_blob(
                threshold.target_precision, self.settings.monitoring.monitor_alpha, record.threshold_version)
            fresh_alarm = _feed(body, correct, judged, self.clock())
            written = await self.storage.put_state(
                tenant, key, body, expected_version=blob.version if blob else 0)
            if written is not None:
                break
        else:
            log.warning("monitor %s/%s: gave up after %d conflicting writes; label dropped",
                        tenant, key, MAX_CAS_ATTEMPTS)
            return None
        alarm = _alarm_of(body)
        self._alarms[(tenant, record.panel, record.threshold_version)] = (alarm, time.monotonic())
        if not fresh_alarm or alarm is None:
            return None
        evidence = PrecisionMonitor.from_state(body["precision"]).report()
        event = MonitorEvent(
            panel=record.panel, created_at=alarm.at, kind="alarm",
            threshold_version=record.threshold_version, action=on_drift,
            reason=alarm.reason(on_drift.replace("_", " ")), evidence=_clean(evidence))
        event.version = await self.storage.put_monitor_event(tenant, record.panel, event)
        log.warning("monitor %s/%s: %s", tenant, key, event.reason)
        return event

    # ------------------------------------------------------------------ operator
    async def clear(self, tenant: str, panel: str, threshold: ThresholdRecord) -> MonitorEvent | None:
        """Clear the alarm of ``threshold``'s version and restart its monitor; None when it was
        not in alarm (nothing written)."""
        assert threshold.version is not None
        key = monitor_key(panel, threshold.version)
        for _ in range(MAX_CAS_ATTEMPTS):
            blob = await self.storage.get_state(tenant, key)
            if blob is None or blob.body.get("alarm") is None:
                self._alarms[(tenant, panel, threshold.version)] = (None, time.monotonic())
                return None
            body = dict(blob.body)
            evidence = PrecisionMonitor.from_state(body["precision"]).report()
            body["precision"] = PrecisionMonitor(
                float(body["target"]), alpha=float(body["alpha"])).to_state()
            body["alarm"] = None
            body["restarts"] = int(body.get("restarts", 0)) + 1
            if await self.storage.put_state(tenant, key, body,
                                            expected_version=blob.version) is not None:
                break
        else:
            raise RuntimeError("monitor clear: too many conflicting writes")
        self._alarms[(tenant, panel, threshold.version)] = (None, time.monotonic())
        event = MonitorEvent(
            panel=panel, created_at=self.clock(), kind="clear",
            threshold_version=threshold.version, action="cleared",
            reason=f"cleared by an operator; the monitor of threshold version "
                   f"{threshold.version} restarts from zero labels", evidence=_clean(evidence))
        event.version = await self.storage.put_monitor_event(tenant, panel, event)
        return event

    # ------------------------------------------------------------------ reading
    async def snapshot(self, tenant: str, panel: str, threshold: ThresholdRecord | None) -> dict[str, Any]:
        """Everything /v1/monitor, /metrics and the dashboard show for (tenant, panel)."""
        body = None
        if threshold is not None and threshold.version is not None:
            blob = await self.storage.get_state(tenant, monitor_key(panel, threshold.version))
            body = blob.body if blob else None
        if body is not None:
            report = PrecisionMonitor.from_state(body["precision"]).report()
            brier = {name: BrierDrift.from_state(state).report()
                     for name, state in body.get("judges", {}).items()}
        else:
            report = {"estimate": math.nan, "lower": 0.0, "upper": 1.0, "labels": 0}
            brier = {}
        alarm = _alarm_of(body)
        votes = {judge: drift.report() for (t, p, judge), drift in self.votes.items()
                 if t == tenant and p == panel}
        return {
            "state": "alarm" if alarm is not None else "ok",
            "alarm": alarm,
            "precision": {"estimate": _finite(report["estimate"]), "lower": float(report["lower"]),
                          "upper": float(report["upper"]), "labels": int(report["labels"])},
            "window": {"start": report.get("window_start", 0),
                       "labels": report.get("window_labels", 0)},
            "target": threshold.target_precision if threshold is not None else None,
            "threshold_version": threshold.version if threshold is not None else None,
            "alpha": body["alpha"] if body else self.settings.monitoring.monitor_alpha,
            "restarts": int(body.get("restarts", 0)) if body else 0,
            "series": [list(p) for p in body.get("series", [])] if body else [],
            "judges": {name: {"brier": _clean(brier.get(name)),
                              "votes": _clean(votes.get(name))}
                       for name in sorted(set(brier) | set(votes))},
        }


class _BatchedVoteDrift:
    """A :class:`VoteDrift` fed with the means of batches of :data:`VOTE_BATCH` votes (1: each
    vote), counting votes for the report."""

    def __init__(self, alpha: float) -> None:
        self.drift = VoteDrift(VOTE_REFERENCE_BATCHES, alpha=alpha, min_level=VOTE_MIN_LEVEL)
        self.n = 0
        self.a = 0
        self.confidence = 0.0
        self.votes = 0

    def add(self, choice: str | None, confidence: float | None) -> None:
        if choice not in ("A", "B") or confidence is None:
            self.drift.invalid += 1
            return
        self.votes += 1
        self.n += 1
        self.a += choice == "A"
        self.confidence += confidence
        if self.n == VOTE_BATCH:
            self.drift.share_a.update(self.a / VOTE_BATCH)
            self.drift.confidence.update(min(1.0, self.confidence / VOTE_BATCH))
            self.n, self.a, self.confidence = 0, 0, 0.0

    def report(self) -> dict[str, Any]:
        return {**self.drift.report(), "votes": self.votes, "batch": VOTE_BATCH,
                "pending": self.n}


def _feed(body: dict[str, Any], correct: bool, judged: list[tuple[str, float, bool]],
          now: float) -> bool:
    """Add one label to the blob ``body`` in place; True when this label raised the alarm."""
    monitor = PrecisionMonitor.from_state(body["precision"])
    monitor.update(correct)
    body["precision"] = monitor.to_state()
    judges = body.setdefault("judges", {})
    for name, confidence, right in judged:
        state = judges.get(name)
        drift = BrierDrift.from_state(state) if state else BrierDrift(alpha=float(body["alpha"]))
        drift.update(confidence, right)
        judges[name] = drift.to_state()
    estimate, lower, upper = monitor.bounds()
    series = body.setdefault("series", [])
    series.append([now, monitor.labels, _finite(estimate), lower, upper])
    del series[:-SERIES_POINTS]
    if monitor.alarm() and body.get("alarm") is None:
        body["alarm"] = {"at": now, "labels": monitor.labels, "upper": upper}
        return True
    return False


def _alarm_of(body: dict[str, Any] | None) -> Alarm | None:
    if not body or not body.get("alarm"):
        return None
    a = body["alarm"]
    return Alarm(threshold_version=int(body["threshold_version"]), at=float(a["at"]),
                 labels=int(a["labels"]), upper=float(a["upper"]), target=float(body["target"]))


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become None (strict JSON has no NaN)."""
    if isinstance(value, float):
        return _finite(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
