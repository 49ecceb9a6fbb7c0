"""The precision monitor's stored state and the one fold that changes it (docs/design.md, 'Tuning
and monitoring on the population').

:class:`MonitorState` is the compare-and-set blob of one (tenant, panel, threshold version):
the :class:`~judgefuse.calibration.sequential.PrecisionMonitor`'s state, each judge's
:class:`~judgefuse.calibration.drift.BrierDrift` state, the bound over time (the last
:data:`SERIES_POINTS` labels, for the console), the alarm once raised, the operator's clears
and the short hashes of the last :data:`SEEN_CAP` verdicts counted. It is stored as JSON
(:meth:`MonitorState.to_json`, :meth:`MonitorState.from_json`: a blob missing the fields an
older writer did not write reads with their defaults).

Both ways of changing it run :func:`fold_labels`: a label's own write (:func:`feed_label`,
which skips a verdict the blob counted already) and a rebuild from the stored audit labels
(:func:`refold` of :func:`since_clear`'s labels in :func:`in_fold_order`). Pure: no storage
here (:mod:`judgefuse.service.monitoring.monitor` reads and writes the blob).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judgefuse.calibration.drift import BrierDrift
from judgefuse.calibration.sequential import PrecisionMonitor
from judgefuse.service.storage import VerdictRecord

__all__ = [
    "SEEN_CAP",
    "SERIES_POINTS",
    "FoldedLabel",
    "MonitorState",
    "StoredAlarm",
    "counted_labels",
    "counts_unlisted",
    "feed_label",
    "finite_or_none",
    "fold_labels",
    "in_fold_order",
    "refold",
    "since_clear",
]

SERIES_POINTS = 240
"""How many (time, labels, estimate, lower, upper) points of the bound the blob keeps."""
SEEN_CAP = 1024
"""Short hashes of the newest verdicts a blob counted (the rebuild/label race:
:mod:`judgefuse.service.monitoring.monitor`)."""


def finite_or_none(x: float | None) -> float | None:
    """``x`` as a float, None when it is None, NaN or infinite (strict JSON has no NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


@dataclass(frozen=True)
class StoredAlarm:
    """The alarm as the blob keeps it: when (the label's decided time), after how many labels,
    and the upper bound that fell below the target."""

    at: float
    labels: int
    upper: float

    def to_json(self) -> dict[str, Any]:
        return {"at": self.at, "labels": self.labels, "upper": self.upper}


@dataclass
class MonitorState:
    """One threshold version's monitor blob (module docstring)."""

    target: float
    alpha: float
    threshold_version: int
    precision: dict[str, Any]
    """:meth:`PrecisionMonitor.to_state`."""
    judges: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Judge name -> :meth:`BrierDrift.to_state`."""
    series: list[list[Any]] = field(default_factory=list)
    """[time, labels, estimate (None when undefined), lower, upper] per point, oldest first."""
    alarm: StoredAlarm | None = None
    restarts: int = 0
    """Operator clears so far (each restarts the monitor)."""
    seen: list[str] = field(default_factory=list)
    cleared_at: float | None = None
    """The last clear's time: a rebuild folds only labels decided after it."""

    @classmethod
    def new(cls, target: float, alpha: float, version: int) -> MonitorState:
        """A monitor of no labels at ``target`` and ``alpha``."""
        return cls(target, alpha, version, PrecisionMonitor(target, alpha=alpha).to_state())

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> MonitorState:
        """The state of a stored blob (fields an older writer left out take their defaults)."""
        alarm = body.get("alarm")
        return cls(
            target=float(body["target"]),
            alpha=float(body["alpha"]),
            threshold_version=int(body["threshold_version"]),
            precision=dict(body["precision"]),
            judges=dict(body.get("judges") or {}),
            series=[list(point) for point in body.get("series") or ()],
            alarm=StoredAlarm(float(alarm["at"]), int(alarm["labels"]), float(alarm["upper"])) if alarm else None,
            restarts=int(body.get("restarts", 0)),
            seen=list(body.get("seen") or ()),
            cleared_at=body.get("cleared_at"),
        )

    def to_json(self) -> dict[str, Any]:
        """The blob to store (every field, in the order :meth:`from_json` reads them)."""
        return {
            "target": self.target,
            "alpha": self.alpha,
            "threshold_version": self.threshold_version,
            "precision": self.precision,
            "judges": dict(self.judges),
            "series": [list(point) for point in self.series],
            "alarm": self.alarm.to_json() if self.alarm is not None else None,
            "restarts": self.restarts,
            "seen": list(self.seen),
            "cleared_at": self.cleared_at,
        }

    @property
    def labels(self) -> int:
        """How many labels the monitor counts (since its last restart)."""
        return PrecisionMonitor.from_state(self.precision).labels

    def report(self) -> dict[str, Any]:
        """The precision monitor's report (its bound, labels, window)."""
        return PrecisionMonitor.from_state(self.precision).report()


def _seen_tag(verdict_id: str) -> str:
    """A 48-bit hash of a verdict id: what a blob remembers of the verdicts it counted."""
    return hashlib.blake2b(verdict_id.encode("utf-8"), digest_size=6).hexdigest()


def _judged(record: VerdictRecord, label: str) -> tuple[tuple[str, float, bool], ...]:
    return tuple(
        (v.judge, float(v.confidence), v.choice == label)
        for v in record.verdict.votes
        if v.valid and v.choice is not None and v.confidence is not None
    )


@dataclass(frozen=True)
class FoldedLabel:
    """One audit label as the monitor folds it: right or wrong, each judge's (confidence,
    right), when it was first decided, and whose verdict (for the blob's ``seen`` hashes)."""

    verdict_id: str
    correct: bool
    when: float
    judged: tuple[tuple[str, float, bool], ...] = ()

    @classmethod
    def of(cls, record: VerdictRecord, label: str) -> FoldedLabel:
        """The label ``label`` (``A``/``B``) of a stored or just-labelled ``record``."""
        when = record.decided_at or record.labelled_at or record.created_at
        return cls(record.id, record.verdict.choice == label, when, _judged(record, label))


def in_fold_order(labels: Iterable[FoldedLabel]) -> list[FoldedLabel]:
    """The order a rebuild folds stored labels in: first decided first (ties by verdict id)."""
    return sorted(labels, key=lambda label: (label.when, label.verdict_id))


def feed_label(state: MonitorState, label: FoldedLabel, *, series_points: int = SERIES_POINTS) -> bool | None:
    """A label's own write: fold it into ``state`` unless the blob counted its verdict already (a
    rebuild folded it first: None); else whether it raised the alarm."""
    if _seen_tag(label.verdict_id) in state.seen:
        return None
    return fold_labels(state, [label], series_points=series_points)


def fold_labels(state: MonitorState, labels: Sequence[FoldedLabel], *, series_points: int = SERIES_POINTS) -> bool:
    """Add ``labels`` in order to ``state`` in place: the precision monitor, each judge's Brier
    drift and the ``seen`` hashes; True when one of them raised the alarm.

    The one fold of both paths: a label's own write folds one, a rebuild all stored ones
    (:func:`in_fold_order`). The detectors' states are read and written once per call. The
    bound series (console only; it never decides the alarm) gets a point for each of the last
    ``series_points`` labels: a bound costs ~10 ms, so a rebuild of 2,000 labels computes 240
    of them, not 2,000.
    """
    monitor = PrecisionMonitor.from_state(state.precision)
    drifts = {name: BrierDrift.from_state(judge) for name, judge in state.judges.items()}
    raised = False
    first_point = len(labels) - series_points
    for i, label in enumerate(labels):
        monitor.update(label.correct)
        for name, confidence, right in label.judged:
            drift = drifts.get(name)
            if drift is None:
                drift = drifts[name] = BrierDrift(alpha=state.alpha)
            drift.update(confidence, right)
        upper: float | None = None
        if i >= first_point:
            estimate, lower, upper = monitor.bounds()
            state.series.append([label.when, monitor.labels, finite_or_none(estimate), lower, upper])
        if monitor.alarm() and state.alarm is None:
            if upper is None:
                upper = monitor.bounds()[2]
            state.alarm = StoredAlarm(label.when, monitor.labels, upper)
            raised = True
        state.seen.append(_seen_tag(label.verdict_id))
        del state.seen[:-SEEN_CAP]
    del state.series[:-SERIES_POINTS]
    state.precision = monitor.to_state()
    state.judges = {name: drift.to_state() for name, drift in drifts.items()}
    return raised


def counted_labels(state: MonitorState | None) -> int:
    """How many labels the blob counts (0: no blob)."""
    return state.labels if state is not None else 0


def counts_unlisted(state: MonitorState | None, listed: Sequence[FoldedLabel]) -> bool:
    """Whether the blob counts a label missing from ``listed`` (more labels, or a verdict hash
    the listing lacks): a rebuild folding ``listed`` would drop it."""
    if state is None:
        return False
    if state.labels > len(listed):
        return True
    tags = {_seen_tag(x.verdict_id) for x in listed}
    return any(tag not in tags for tag in state.seen)


def since_clear(state: MonitorState | None, stored: Sequence[FoldedLabel]) -> list[FoldedLabel]:
    """The stored labels the blob's monitor counts: those decided after an operator's clear."""
    since = state.cleared_at if state is not None else None
    return list(stored) if since is None else [x for x in stored if x.when > since]


def refold(
    old: MonitorState | None,
    labels: Sequence[FoldedLabel],
    *,
    target: float,
    version: int,
    alpha: float,
    series_points: int = SERIES_POINTS,
) -> tuple[MonitorState, bool]:
    """A rebuild's blob: ``labels`` (:func:`since_clear`, in :func:`in_fold_order`) folded into a
    fresh monitor, keeping the old blob's alpha (``alpha`` without one), restarts, clear time
    and alarm (an alarm never un-raises); and whether the fold raised the alarm."""
    state = MonitorState.new(target, old.alpha if old is not None else alpha, version)
    if old is not None:
        state.restarts, state.cleared_at, state.alarm = old.restarts, old.cleared_at, old.alarm
    return state, fold_labels(state, labels, series_points=series_points)
