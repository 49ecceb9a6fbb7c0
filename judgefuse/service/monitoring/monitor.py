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
(``O(log labels)``), a :class:`~judgefuse.service.monitoring.monitor_state.MonitorState` stored
as one versioned JSON blob (``Storage.get_state``/``put_state``); a label reads it, adds itself,
and writes it back iff nobody wrote in between (else it rereads and retries: the kernel's
:func:`~judgefuse.service.kernel.shared_state.update_state`). So replicas sharing Redis never lose or double an update, the hot path of a label
is ``O(log t)`` and two round trips, and nothing is ever rebuilt from a log. The blob also holds
the per-judge :class:`~judgefuse.calibration.drift.BrierDrift` (fed by the same audit labels)
and the bound over time (the last
:data:`~judgefuse.service.monitoring.monitor_state.SERIES_POINTS` labels) for the dashboard. So each
judge's Brier reference period is the first 200 audit labels after a tune: a retune also
restarts judge drift, against the calibration the new threshold was tuned on. Per label the
blob update costs ~5-8 ms of CPU (monitor, three judges' Brier detectors, JSON of ~20 kB at
most), labels arrive at human speed, and the verdict hot path never touches it.

**Relabels are ignored.** A sequential monitor consumes labels in arrival order and its state
is sums over restart windows; a relabel would have to rewrite a past observation in every
window holding it. Only a verdict's *first* label feeds the monitor (``LabelOutcome.status ==
"labelled"``, which storage reports exactly once per verdict), so a retried or corrected label
never counts twice. A correction still reaches the next tuning, which reads the labelled store.

**No label is ever dropped: the blob is a fold of the stored audit labels.** The label is
committed before the monitor hears of it, so the store is the truth and the blob a cache of
folding its audit labels (stratum ``audit`` but no ``audit_band`` draw of active audits, whose
sample is not uniform; this threshold version; an ``A``/``B`` label) in
the order they were first decided. The incremental path above keeps it current; when it
cannot (more than :data:`MAX_CAS_ATTEMPTS` conflicting writers, a storage error, a crash
between the label and the blob write), :meth:`Monitors.rebuild` folds the stored labels from
scratch and writes the result with the same compare-and-set (both paths run one fold,
:func:`~judgefuse.service.monitoring.monitor_state.fold_labels`; a rebuild lists the stored labels once and, on a lost compare-and-set,
rereads only the blob, listing again only when that blob counts a label the listing lacks).
Rebuilds run in the background
after a give-up or a failed write (retried with backoff until written), and at start
(:meth:`Monitors.reconcile_all`: a replica killed mid-label catches up when it or any replica
starts; a blob that already counts every stored label is left alone). The blob remembers a short hash of the last
:data:`~judgefuse.service.monitoring.monitor_state.SEEN_CAP` verdicts it counted, so a label whose own write loses to a rebuild that
already folded it is not counted twice. After any crash or storm the monitor's label count
equals a recount of the stored audit labels (tested with 300 concurrent first labels on two
replicas, and after SIGKILL). An operator's clear starts the fold after its time
(``cleared_at``). Labels fed in a different order than a rebuild would fold them change only
which restart window holds them, not the guarantee of any one order: the order is not chosen by
the labels' values. A rebuilt stream is read along more than one order, though; the false-alarm
rate of the whole path, with out-of-order arrival, lost writes and restarts injected, is
measured by ``benchmarks/bench_monitor_false_alarm.py`` (docs/results.md).

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
and restarts with the process. It costs one detector update per vote: 14 us of Python per vote
at 100,000-200,000 votes (the window sums are numpy arrays and scans that cannot alarm are
skipped: ``RestartedMean``, ``MeanShiftDetector.update``). Votes
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

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import quote

from judgefuse.calibration.drift import VoteDrift
from judgefuse.calibration.sequential import PrecisionMonitor
from judgefuse.judges.types import LETTERS, JudgeVote, Letter
from judgefuse.service.kernel.shared_state import StateContention, update_state
from judgefuse.service.monitoring.monitor_state import (
    FoldedLabel,
    MonitorState,
    counted_labels,
    counts_unlisted,
    feed_label,
    finite_or_none,
    in_fold_order,
    refold,
    since_clear,
)
from judgefuse.service.monitoring.snapshot import DetectorReports, VoteCopy
from judgefuse.service.settings import Settings
from judgefuse.service.storage import (
    Coordination,
    LabelLedger,
    MonitorEvent,
    ThresholdRecord,
    VerdictRecord,
    VersionedRecords,
)
from judgefuse.service.storage.records import BAND_AUDIT

__all__ = [
    "DRIFT_ALARM",
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
MAX_CAS_ATTEMPTS = 50
"""Conflicting writes one label tries before handing its key to :meth:`Monitors.rebuild`."""
REBUILD_ATTEMPTS = 20
"""Compare-and-set attempts of one rebuild before it waits and tries again (in the background)."""


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


def _monitored(record: VerdictRecord, version: int) -> bool:
    """A stored record the monitor of threshold ``version`` counts (module doc)."""
    return (record.review is not None and record.review.stratum == "audit"
            and record.review.reason != BAND_AUDIT
            and record.threshold_version == version and record.label in LETTERS)


@dataclass
class _Rebuild:
    """A background rebuild in flight (:meth:`Monitors.rebuild_soon`)."""

    task: asyncio.Task[None] | None = None
    run_again: bool = False
    """Asked for again while running: fold once more when done (a label may have come since)."""


class Monitors:
    """The precision monitors, judge drift and alarm cache of one gateway. The storage comes
    by contract (usually one storage, passed three times): the state blobs in ``coordination``,
    the events and thresholds in ``versioned``, the labels a rebuild reads in ``labels``."""

    def __init__(self, settings: Settings, coordination: Coordination, versioned: VersionedRecords,
                 labels: LabelLedger, *, clock: Callable[[], float] = time.time) -> None:
        self.settings = settings
        self.coordination = coordination
        self.versioned = versioned
        self.labels = labels
        self.clock = clock
        self._alarms: dict[tuple[str, str, int], tuple[Alarm | None, float]] = {}
        self.votes: dict[tuple[str, str, str], _BatchedVoteDrift] = {}
        self._rebuilds: dict[tuple[str, str, int], _Rebuild] = {}
        """The background rebuild of each (tenant, panel, threshold version) in flight."""
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}
        self.reports = DetectorReports()
        """The snapshot's detector reports, computed off the loop (:mod:`.snapshot`)."""

    # ------------------------------------------------------------------ hot path
    async def alarm(self, tenant: str, panel: str, threshold_version: int | None) -> Alarm | None:
        """The live alarm of the routing threshold version, through a ``state_ttl_s`` cache."""
        if threshold_version is None:
            return None
        key = (tenant, panel, int(threshold_version))
        hit = self._alarms.get(key)
        if hit is not None and time.monotonic() - hit[1] <= self.settings.learning.state_ttl_s:
            return hit[0]
        blob = await self.coordination.get_state(tenant, monitor_key(panel, threshold_version))
        alarm = _alarm_of(MonitorState.from_json(blob.body) if blob and blob.body else None)
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
        if (stamp is None or stamp.stratum != "audit" or stamp.reason == BAND_AUDIT
                or record.threshold_version is None or threshold is None or threshold.target_precision is None
                or not 0.0 < threshold.target_precision < 1.0):
            return None
        if label not in LETTERS:
            return None  # a tie or both-bad label says nothing about an auto-accepted choice
        folded = FoldedLabel.of(record, label)
        key = monitor_key(record.panel, record.threshold_version)
        # one writer per key in this process: compare-and-set conflicts only between replicas
        lock = self._locks.setdefault((tenant, key), asyncio.Lock())
        try:
            async with lock:
                outcome, state, fresh_alarm = await self._feed_one(tenant, key, record, threshold,
                                                                  folded)
        except Exception:
            self.rebuild_soon(tenant, record.panel, threshold, on_drift=on_drift)
            raise
        if state is None:
            if outcome == "gave_up":  # the store still holds the label
                log.warning("monitor %s/%s: %d conflicting writes; rebuilding from the stored "
                            "audit labels", tenant, key, MAX_CAS_ATTEMPTS)
                self.rebuild_soon(tenant, record.panel, threshold, on_drift=on_drift)
            return None
        return await self._after_write(tenant, record.panel, record.threshold_version, state,
                                       fresh_alarm, on_drift)

    async def _feed_one(
        self, tenant: str, key: str, record: VerdictRecord, threshold: ThresholdRecord,
        folded: FoldedLabel,
    ) -> tuple[str, MonitorState | None, bool]:
        """One label's compare-and-set write: (``written``, ``counted`` (already) or ``gave_up``;
        the state written; whether it raised the alarm)."""
        target, version = threshold.target_precision, record.threshold_version
        assert target is not None and version is not None

        def fed(body: dict[str, Any]) -> tuple[dict[str, Any] | None, tuple[str, MonitorState | None, bool]]:
            state = (MonitorState.from_json(body) if body
                     else MonitorState.new(target, self.settings.monitoring.monitor_alpha, version))
            # the series point is stamped with the time the monitor heard of the label
            fresh_alarm = feed_label(state, replace(folded, when=self.clock()))
            if fresh_alarm is None:
                return None, ("counted", None, False)  # a rebuild folded this label already
            return state.to_json(), ("written", state, fresh_alarm)

        try:
            return await update_state(self.coordination, tenant, key, fed, attempts=MAX_CAS_ATTEMPTS)
        except StateContention:
            return "gave_up", None, False

    async def _after_write(self, tenant: str, panel: str, version: int, state: MonitorState,
                           fresh_alarm: bool, on_drift: str) -> MonitorEvent | None:
        """Cache the written blob's alarm; write the alarm event when this write raised it."""
        alarm = _alarm_of(state)
        self._alarms[(tenant, panel, version)] = (alarm, time.monotonic())
        if not fresh_alarm or alarm is None:
            return None
        evidence = state.report()
        event = MonitorEvent(
            panel=panel, created_at=alarm.at, kind="alarm",
            threshold_version=version, action=on_drift,
            reason=alarm.reason(on_drift.replace("_", " ")), evidence=_clean(evidence))
        event.version = await self.versioned.put_monitor_event(tenant, panel, event)
        log.warning("monitor %s/%s: %s", tenant, monitor_key(panel, version), event.reason)
        return event

    # ------------------------------------------------------------------ rebuilds
    async def stored_labels(self, tenant: str, panel: str, version: int) -> list[FoldedLabel]:
        """The stored audit labels threshold ``version``'s monitor counts, in fold order."""
        return in_fold_order(FoldedLabel.of(r, str(r.label))
                             for r in await self.labels.iter_labelled(tenant, panel)
                             if _monitored(r, version))

    async def rebuild(self, tenant: str, panel: str, threshold: ThresholdRecord, *,
                      on_drift: str = "review_everything", only_if_behind: bool = False) -> bool:
        """Fold the stored audit labels of ``threshold``'s version into a fresh blob and write it
        (compare-and-set); True when written or already equal. ``only_if_behind``: leave a blob
        that already counts every stored label alone (the reconcile check)."""
        version = threshold.version
        target = threshold.target_precision
        if version is None or target is None or not 0.0 < target < 1.0:
            return True
        key = monitor_key(panel, version)
        async with self._locks.setdefault((tenant, key), asyncio.Lock()):
            return await self._rebuild_locked(tenant, panel, version, target, key, on_drift,
                                              only_if_behind)

    async def _rebuild_locked(self, tenant: str, panel: str, version: int, target: float, key: str,
                              on_drift: str, only_if_behind: bool) -> bool:
        """The stored labels are listed once per rebuild; a compare-and-set retry rereads only the
        blob, and lists again only when that blob counts a label the listing lacks (a label
        written since: folding without it would lose it)."""
        stored: list[FoldedLabel] | None = None

        async def rebuilt(
            body: dict[str, Any],
        ) -> tuple[dict[str, Any] | None, tuple[MonitorState, bool, int, int] | None]:
            nonlocal stored
            old = MonitorState.from_json(body) if body else None
            if stored is None or counts_unlisted(old, stored):
                stored = await self.stored_labels(tenant, panel, version)
            labels = since_clear(old, stored)
            counted = counted_labels(old)
            if only_if_behind and counted == len(labels):
                return None, None
            state, fresh_alarm = refold(old, labels, target=target, version=version,
                                        alpha=self.settings.monitoring.monitor_alpha)
            return state.to_json(), (state, fresh_alarm, counted, len(labels))

        try:
            written = await update_state(self.coordination, tenant, key, rebuilt, attempts=REBUILD_ATTEMPTS)
        except StateContention:
            return False
        if written is None:
            return True  # it counts every stored label already
        state, fresh_alarm, counted, n_labels = written
        if counted != n_labels:
            log.info("monitor %s/%s: rebuilt from %d stored audit labels (the blob counted %d)",
                     tenant, key, n_labels, counted)
        await self._after_write(tenant, panel, version, state, fresh_alarm, on_drift)
        return True

    def rebuild_soon(self, tenant: str, panel: str, threshold: ThresholdRecord | int, *,
                     on_drift: str = "review_everything") -> None:
        """Rebuild in the background until it is written (one task per key at a time).

        ``threshold`` may be just its version: a label whose monitor write failed because the
        store could not even hand back the threshold record (a pool exhausted under load, a
        restarting PostgreSQL) still has to be counted, so the record is read in the loop and
        its failures retried like the rebuild's own. Without this, such a label waited for the
        next restart's reconcile."""
        version = threshold if isinstance(threshold, int) else int(threshold.version or 0)
        key = (tenant, panel, version)
        running = self._rebuilds.get(key)
        if running is not None:
            running.run_again = True  # once more when the current one ends
            return
        this = self._rebuilds[key] = _Rebuild()

        async def record() -> ThresholdRecord | None:
            if isinstance(threshold, int):
                return await self.versioned.get_threshold(tenant, panel, version=threshold)
            return threshold

        async def run() -> None:
            delay = 0.05
            try:
                while True:
                    this.run_again = False
                    try:
                        current = await record()
                        if current is None:
                            return  # no such threshold version: nothing to monitor
                        done = await self.rebuild(tenant, panel, current, on_drift=on_drift)
                    except Exception as exc:  # storage down: try again later, never give up
                        log.warning("monitor %s/%s: rebuild failed (%s: %s); retrying",
                                    tenant, panel, type(exc).__name__, exc)
                        done = False
                    if done and not this.run_again:
                        return
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            finally:
                self._rebuilds.pop(key, None)

        this.task = asyncio.get_running_loop().create_task(run())

    async def reconcile(self, tenant: str, panel: str, threshold: ThresholdRecord | None, *,
                        on_drift: str = "review_everything") -> None:
        """Rebuild the blob of ``threshold``'s version if it counts fewer (or more) labels than
        the store holds."""
        if threshold is None or threshold.version is None:
            return
        if not await self.rebuild(tenant, panel, threshold, on_drift=on_drift, only_if_behind=True):
            self.rebuild_soon(tenant, panel, threshold, on_drift=on_drift)

    async def reconcile_all(self, tenants: Sequence[str], panels: Mapping[str, str]) -> None:
        """At start: every (tenant, panel)'s current monitor against the store (``panels``:
        name -> on_drift). Failures are logged; the next read or label tries again."""
        for tenant in tenants:
            for panel, on_drift in panels.items():
                try:
                    threshold = await self.versioned.get_threshold(tenant, panel)
                    await self.reconcile(tenant, panel, threshold, on_drift=on_drift)
                except Exception as exc:
                    log.warning("monitor %s/%s: start-up reconcile failed (%s)", tenant, panel,
                                type(exc).__name__)

    async def aclose(self) -> None:
        """Wait for background rebuilds (briefly), then cancel what is left."""
        tasks = [r.task for r in self._rebuilds.values() if r.task is not None]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            for task in pending:
                task.cancel()
        self.reports.close()

    # ------------------------------------------------------------------ operator
    async def clear(self, tenant: str, panel: str, threshold: ThresholdRecord) -> MonitorEvent | None:
        """Clear the alarm of ``threshold``'s version and restart its monitor; None when it was
        not in alarm (nothing written)."""
        assert threshold.version is not None
        key = monitor_key(panel, threshold.version)

        def cleared(body: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            state = MonitorState.from_json(body) if body else None
            if state is None or state.alarm is None:
                return None, None
            evidence = state.report()
            state.precision = PrecisionMonitor(state.target, alpha=state.alpha).to_state()
            state.alarm = None
            state.restarts += 1
            state.cleared_at = self.clock()  # a rebuild folds only labels decided after it
            return state.to_json(), evidence

        try:
            evidence = await update_state(self.coordination, tenant, key, cleared, attempts=MAX_CAS_ATTEMPTS)
        except StateContention:
            raise RuntimeError("monitor clear: too many conflicting writes") from None
        self._alarms[(tenant, panel, threshold.version)] = (None, time.monotonic())
        if evidence is None:  # not in alarm: nothing written
            return None
        event = MonitorEvent(
            panel=panel, created_at=self.clock(), kind="clear",
            threshold_version=threshold.version, action="cleared",
            reason=f"cleared by an operator; the monitor of threshold version "
                   f"{threshold.version} restarts from zero labels", evidence=_clean(evidence))
        event.version = await self.versioned.put_monitor_event(tenant, panel, event)
        return event

    # ------------------------------------------------------------------ reading
    async def snapshot(self, tenant: str, panel: str, threshold: ThresholdRecord | None, *,
                       max_age_s: float = 0.0) -> dict[str, Any]:
        """Everything /v1/monitor, /metrics and the dashboard show for (tenant, panel); the
        detectors' reports are computed in a worker thread and a vote-drift report may be up
        to ``max_age_s`` old (:mod:`judgefuse.service.monitoring.snapshot`)."""
        state = stored = None
        if threshold is not None and threshold.version is not None:
            key = monitor_key(panel, threshold.version)
            blob = await self.coordination.get_state(tenant, key)
            if blob is not None and blob.body:
                state = MonitorState.from_json(blob.body)
                stored = (key, blob.version, state)
        copies = {judge: drift.copy for (t, p, judge), drift in list(self.votes.items())
                  if t == tenant and p == panel}
        reports, votes = await self.reports.reports(tenant, panel, stored, copies, max_age_s=max_age_s)
        if reports is not None:
            report, brier = reports.precision, reports.brier
        else:
            report = {"estimate": math.nan, "lower": 0.0, "upper": 1.0, "labels": 0}
            brier = {}
        alarm = _alarm_of(state)
        return {
            "state": "alarm" if alarm is not None else "ok",
            "alarm": alarm,
            "precision": {"estimate": finite_or_none(report["estimate"]), "lower": float(report["lower"]),
                          "upper": float(report["upper"]), "labels": int(report["labels"])},
            "window": {"start": report.get("window_start", 0),
                       "labels": report.get("window_labels", 0)},
            "target": threshold.target_precision if threshold is not None else None,
            "threshold_version": threshold.version if threshold is not None else None,
            "alpha": state.alpha if state is not None else self.settings.monitoring.monitor_alpha,
            "restarts": state.restarts if state is not None else 0,
            "series": [list(p) for p in state.series] if state is not None else [],
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
        if choice not in LETTERS or confidence is None:
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
        return {**self.drift.report(), **self._counts()}

    def copy(self) -> VoteCopy:
        """The detector's state now, to report in a worker thread (``VoteDrift.to_state``:
        ~30 us; its report costs ~100 ms at 10,000 votes)."""
        return VoteCopy(state=self.drift.to_state(), seen=self.votes + self.drift.invalid,
                        counts=self._counts())

    def _counts(self) -> dict[str, int]:
        return {"votes": self.votes, "batch": VOTE_BATCH, "pending": self.n}


def _alarm_of(state: MonitorState | None) -> Alarm | None:
    if state is None or state.alarm is None:
        return None
    a = state.alarm
    return Alarm(threshold_version=state.threshold_version, at=a.at, labels=a.labels, upper=a.upper,
                 target=state.target)


def _clean(value: Any) -> Any:
    """JSON-safe copy: NaN and infinities become None (strict JSON has no NaN)."""
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
