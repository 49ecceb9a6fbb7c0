"""Win rate of system X over system Y among a panel's stored verdicts, corrected by the labels
(``GET /v1/panels/{panel}/winrate``; docs/design.md, 'Win rates' and 'The review loop').

Each request names its two systems in item metadata: answer A's in ``{field}_a``, answer B's in
``{field}_b`` (``field`` defaults to ``system``, as ``judgefuse winrate``'s ``system_a`` /
``system_b``). Every stored verdict comparing X with Y, in either order, counts: its judges'
outcome is 1 when the fused verdict picks X's answer, 0 for Y's, 1/2 when undecided; a label's
outcome is 1 / 0 by the label, 1/2 for a tie or both-bad label.

The labels are not a uniform sample of the verdicts: everything routed to review is queued, an
auto-accepted verdict only when drawn for audit. Within its stratum (``review``, ``auto@{rate}``,
``inline@...``) each labelled verdict is a random one (the queue is served in random order),
so the corrected estimate is the stratified difference estimator of
:func:`judgefuse.calibration.model_assisted.difference_mean` with the judges' outcome as the
prediction and the labels as the correction (the PPI estimate of ``judgefuse winrate``, per
stratum). Beside it: the judge-only mean (normal interval; it inherits the judges' bias) and
the labels-only stratified mean (the same estimator with ``lam = 0``). Unsolicited labels
(verdicts never queued) and records from before the review loop (no stamp) count in the
judge-only estimate only. A stratum with comparisons but no label makes the corrected and
labels-only estimates undefined (NaN -> ``null``) with an interval as wide as its share allows.

Cost: one scan of the panel's stored records in the window (``Storage.iter_records``; items
must be stored, ``store_items``, for their metadata), paged, parsed and folded in worker threads
under the report gate (:mod:`.reports`). What the scan keeps is not the answer but one compact
row per verdict naming two systems under ``field`` (the two systems, the judges' outcome for
A's, the review stratum, the label's outcome, its time), per (tenant, panel, field, window), with
the panel's data version (:func:`.reports.data_version`): any ``x``, ``y`` and ``level`` is
answered from those rows (each answer memoised with its JSON), and the next poll while no
verdict or label of the panel has landed reads nothing from the store: this process's writes
are counted in memory (``Storage.local_writes``), the shared counters re-read once
:data:`SHARED_CHECK_S` old. A scan is redone after :data:`MAX_AGE_S` as well (retention on
another replica drops verdicts without moving a counter). Each tenant's polls are paced
(:meth:`.reports.Reports.pace`, ``estimates.report_polls_per_s``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel

from judgefuse.service.estimates.reports import Reports, data_version
from judgefuse.service.ledger import UNSOLICITED, label_stratum_key, population_stratum_key
from judgefuse.service.storage import LabelLedger, RecordArchive, VerdictRecord

__all__ = ["MAX_AGE_S", "WinRateCache", "WinRateEstimate", "WinRateOut"]

log = logging.getLogger(__name__)

REPORT = "winrate"
MAX_AGE_S = 60.0
"""The longest a scan is reused while the panel's data version has not moved (retention drops
records without moving a counter)."""
MAX_ENTRIES = 32
"""Scans kept, (tenant, panel, field, window) each; the least recently asked goes first."""
MAX_ANSWERS = 64
"""Answers memoised per scan, (x, y, window start, level) each; the least recently asked goes first."""
SHARED_CHECK_S = 1.0
"""The longest a cached answer goes without re-reading the shared counters (:func:`.reports.data_version`:
other replicas' writes); this process's own writes are seen at once (``Storage.local_writes``)."""
FOLD_RECORDS = 500
"""Records handed to the worker thread at a time: the loop holds one such hand-off, not the scan."""


class WinRateEstimate(BaseModel):
    """One estimate of the win rate with its interval (``null``: nothing to estimate from, or
    a stratum with comparisons and no label) and the labels behind it."""

    estimate: float | None
    lower: float | None
    upper: float | None
    labels: int
    method: str


class WinRateOut(BaseModel):
    """``GET /v1/panels/{panel}/winrate``: the three estimates side by side."""

    panel: str
    field: str
    x: str
    y: str
    level: float
    n_verdicts: int
    """Stored verdicts comparing X with Y in the window."""
    n_labels: int
    """Labels in the corrected and labels-only estimates (unsolicited ones left out)."""
    labelled: dict[str, int]
    """Labels per review stratum."""
    represented: dict[str, int]
    """Comparisons per review stratum."""
    unsolicited_labels: int
    corrected: WinRateEstimate
    labels_only: WinRateEstimate
    judge_only: WinRateEstimate


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def _outcome_of_a(letter: str | None) -> float:
    """A comparison's outcome for the system of answer A (``outcome_for_x`` with X = A's)."""
    return 1.0 if letter == "A" else 0.0 if letter == "B" else 0.5


@dataclass
class _Rows:
    """The scan's rows as it is folded, page by page, in a worker thread (module docstring)."""

    field: str
    systems: dict[str, int] = dataclass_field(default_factory=dict)
    strata: dict[str, int] = dataclass_field(default_factory=dict)
    a: list[int] = dataclass_field(default_factory=list)
    b: list[int] = dataclass_field(default_factory=list)
    judged: list[float] = dataclass_field(default_factory=list)
    """The fused verdict's outcome for A's system."""
    stratum: list[int] = dataclass_field(default_factory=list)
    """Index into ``strata``; -1: no review stamp (judge-only)."""
    label: list[float] = dataclass_field(default_factory=list)
    """The label's outcome for A's system; NaN: none, or unsolicited."""
    unsolicited: list[bool] = dataclass_field(default_factory=list)
    created: list[float] = dataclass_field(default_factory=list)

    def fold(self, records: Sequence[VerdictRecord]) -> None:
        for record in records:
            meta = record.item.metadata if record.item is not None else {}
            sys_a, sys_b = meta.get(f"{self.field}_a"), meta.get(f"{self.field}_b")
            if sys_a is None or sys_b is None:
                continue
            self.a.append(self.systems.setdefault(str(sys_a), len(self.systems)))
            self.b.append(self.systems.setdefault(str(sys_b), len(self.systems)))
            self.judged.append(_outcome_of_a(record.verdict.choice))
            self.created.append(record.created_at)
            label, unsolicited, stratum = math.nan, False, -1
            if record.review is None:
                unsolicited = record.label is not None
            else:
                name = population_stratum_key(record.review)
                stratum = self.strata.setdefault(name, len(self.strata))
                if record.label is not None:
                    if label_stratum_key(record) == UNSOLICITED:
                        unsolicited = True
                    else:
                        label = _outcome_of_a(record.label)
            self.stratum.append(stratum)
            self.label.append(label)
            self.unsolicited.append(unsolicited)

    def freeze(self, version: tuple[object, ...], read_at: float, since: float | None) -> _Scan:
        return _Scan(
            version=version, read_at=read_at, since=since, systems=dict(self.systems),
            strata=sorted(self.strata, key=self.strata.__getitem__),
            a=np.asarray(self.a, dtype=np.int64), b=np.asarray(self.b, dtype=np.int64),
            judged=np.asarray(self.judged, dtype=np.float64),
            stratum=np.asarray(self.stratum, dtype=np.int64),
            label=np.asarray(self.label, dtype=np.float64),
            unsolicited=np.asarray(self.unsolicited, dtype=bool),
            created=np.asarray(self.created, dtype=np.float64),
            ordered=bool(np.all(np.diff(np.asarray(self.created, dtype=np.float64)) >= 0)),
        )


@dataclass(frozen=True)
class _Scan:
    """One scan's rows, as arrays in the scan's (created_at, id) order, and what it was read under."""

    version: tuple[object, ...]
    read_at: float
    since: float | None
    systems: dict[str, int]
    strata: list[str]
    a: npt.NDArray[np.int64]
    b: npt.NDArray[np.int64]
    judged: npt.NDArray[np.float64]
    stratum: npt.NDArray[np.int64]
    label: npt.NDArray[np.float64]
    unsolicited: npt.NDArray[np.bool_]
    created: npt.NDArray[np.float64]
    ordered: bool = True
    """``created`` ascending, as ``iter_records`` yields them (else a window's answer is not memoised)."""
    answers: OrderedDict[tuple[str, str, int, float], tuple[WinRateOut, bytes]] = dataclass_field(
        default_factory=OrderedDict, compare=False, repr=False)
    """Answers already given from these rows, with their JSON, per (x, y, first row of the
    window, level): a repeated poll is a lookup (:meth:`answer_json`)."""

    def _memo_key(self, x: str, y: str, since: float | None, level: float) -> tuple[str, str, int, float] | None:
        """The rows a window keeps are those from the first created at or after ``since`` on,
        so two windows starting before the same row have the same answer."""
        if since is None:
            return (x, y, 0, level)
        if not self.ordered:
            return None
        return (x, y, int(np.searchsorted(self.created, since, side="left")), level)

    def answer_json(self, x: str, y: str, since: float | None, level: float) -> tuple[WinRateOut, bytes] | None:
        """The answer already given for these arguments and its JSON, or None (then
        :meth:`compute_json`)."""
        key = self._memo_key(x, y, since, level)
        found = None if key is None else self.answers.get(key)
        if found is not None and key is not None:
            self.answers.move_to_end(key)
        return found

    def compute_json(self, panel: str, field: str, x: str, y: str, since: float | None,
                     level: float) -> tuple[WinRateOut, bytes]:
        """:meth:`answer` and its JSON (in a worker thread; :meth:`remember` keeps it, on the loop)."""
        out = self.answer(panel, field, x, y, since, level)
        return out, out.model_dump_json().encode()

    def remember(self, x: str, y: str, since: float | None, level: float,
                 found: tuple[WinRateOut, bytes]) -> None:
        """Memoise ``found`` for :meth:`answer_json` (at most :data:`MAX_ANSWERS` per scan)."""
        key = self._memo_key(x, y, since, level)
        if key is not None:
            self.answers[key] = found
            while len(self.answers) > MAX_ANSWERS:
                self.answers.popitem(last=False)

    def answer(self, panel: str, field: str, x: str, y: str, since: float | None, level: float) -> WinRateOut:
        """The ``WinRateOut`` body (module docstring) of the rows comparing ``x`` with ``y``
        created at or after ``since``."""
        from judgefuse.calibration.model_assisted import AssistedStratum, difference_mean
        from judgefuse.calibration.win_rate import clt_mean

        ix, iy = self.systems.get(x), self.systems.get(y)
        if ix is None or iy is None:
            mask = np.zeros(self.a.shape, dtype=bool)
        else:
            mask = ((self.a == ix) & (self.b == iy)) | ((self.a == iy) & (self.b == ix))
        if since is not None:
            mask &= self.created >= since
        x_is_a = self.a[mask] == ix
        judged = np.where(x_is_a, self.judged[mask], 1.0 - self.judged[mask])
        labels = np.where(x_is_a, self.label[mask], 1.0 - self.label[mask])  # NaN stays NaN
        stratum = self.stratum[mask]
        labelled = ~np.isnan(labels)
        assisted = []
        for index in sorted(set(stratum[stratum >= 0].tolist()), key=self.strata.__getitem__):
            part = stratum == index
            points = part & labelled
            assisted.append(AssistedStratum(self.strata[index], int(part.sum()), float(judged[part].sum()),
                                            labels[points], judged[points], np.ones(int(points.sum()))))
        corrected = difference_mean(assisted, level=level, method="win rate corrected by the labels")
        labels_only = difference_mean(assisted, level=level, lam=0.0, method="win rate from the labels only")
        judge_only = clt_mean(judged, alpha=1.0 - level, method="judge verdicts only (normal interval)")
        judge = {"estimate": judge_only.estimate, "lower": judge_only.lower, "upper": judge_only.upper,
                 "labels": 0, "method": judge_only.method}
        return WinRateOut.model_validate({
            "panel": panel, "field": field, "x": x, "y": y, "level": level,
            "n_verdicts": int(mask.sum()),
            "n_labels": corrected.labels,
            "labelled": {s.name: s.labels for s in assisted},
            "represented": {s.name: s.population for s in assisted},
            "unsolicited_labels": int(self.unsolicited[mask].sum()),
            "corrected": corrected.as_dict(),
            "labels_only": labels_only.as_dict(),
            "judge_only": _clean(judge),
        })


class WinRateCache:
    """The scans behind ``GET /v1/panels/{panel}/winrate`` per (tenant, panel, field, window),
    redone only when the panel's data version moved or the scan is :data:`MAX_AGE_S` old;
    concurrent polls of one key share one scan; each scan's answers are memoised (module
    docstring). The version is this process's writes of the panel (``Storage.local_writes``,
    read on every poll: no query) and the shared counters (:func:`.reports.data_version`),
    read again once :data:`SHARED_CHECK_S` old: a cached poll does no storage work in between."""

    def __init__(self, reports: Reports, *, clock: Callable[[], float] = time.time,
                 max_age_s: float = MAX_AGE_S, shared_check_s: float = SHARED_CHECK_S,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.reports = reports
        self.clock = clock
        self.max_age_s = max_age_s
        self.shared_check_s = shared_check_s
        self.monotonic = monotonic
        self.version_reads = 0
        """Reads of the shared counters by this cache (each one :func:`.reports.data_version`)."""
        self._scans: OrderedDict[tuple[str, str, str, int], _Scan] = OrderedDict()
        self._pending: dict[tuple[str, str, str, int], asyncio.Task[_Scan]] = {}
        self._versions: dict[tuple[str, str], asyncio.Future[tuple[tuple[object, ...], float]]] = {}
        self._shared: dict[tuple[str, str], tuple[tuple[object, ...], float]] = {}
        """(tenant, panel) -> the shared counters last read and when (``monotonic``) the read began."""

    async def get(
        self, archive: RecordArchive, labels: LabelLedger, tenant: str, panel: str, *, field: str,
        x: str, y: str, window_hours: int | None, level: float,
    ) -> WinRateOut:
        """The win rate of ``x`` over ``y`` in the last ``window_hours`` (None: all time):
        the records scanned from ``archive``, the version read from ``labels``' counters
        (usually one storage, passed twice)."""
        found = await self.get_json(archive, labels, tenant, panel, field=field, x=x, y=y,
                                    window_hours=window_hours, level=level)
        return found[0]

    async def get_json(
        self, archive: RecordArchive, labels: LabelLedger, tenant: str, panel: str, *, field: str,
        x: str, y: str, window_hours: int | None, level: float,
    ) -> tuple[WinRateOut, bytes]:
        """:meth:`get` and the answer's JSON (the route sends it as it is), each in the
        tenant's turn (:meth:`.reports.Reports.pace`)."""
        await self.reports.pace(tenant, REPORT)
        now = self.clock()
        since = None if not window_hours else now - 3600.0 * window_hours
        version = await self._version(archive, labels, tenant, panel)  # before the records: a verdict
        # landing during the scan leaves it under the older version, scanned again next poll
        key = (tenant, panel, field, window_hours or 0)
        scan = self._scans.get(key)
        if (scan is not None and scan.version == version and now - scan.read_at < self.max_age_s
                and (since is None or (scan.since is not None and scan.since <= since))):
            self.reports.count(tenant, REPORT, "cached")
        else:
            task = self._pending.get(key)
            if task is None:
                task = asyncio.ensure_future(self._scan(archive, key, version, now, since))
                self._pending[key] = task
                task.add_done_callback(lambda done: self._settled(key, done))
            else:
                self.reports.count(tenant, REPORT, "cached")  # shares the scan in progress
            scan = await asyncio.shield(task)
        if key in self._scans:
            self._scans.move_to_end(key)
        found = scan.answer_json(x, y, since, level)
        if found is None:
            found = await self.reports.run(REPORT, scan.compute_json, panel, field, x, y, since, level)
            scan.remember(x, y, since, level, found)
        return found

    async def _version(
        self, archive: RecordArchive, labels: LabelLedger, tenant: str, panel: str,
    ) -> tuple[object, ...]:
        """This process's writes of (tenant, panel) and the shared counters, the latter read
        again only once :attr:`shared_check_s` old (class docstring)."""
        local = archive.local_writes.version(tenant, panel)
        key = (tenant, panel)
        shared = self._shared.get(key)
        if shared is None or self.monotonic() - shared[1] >= self.shared_check_s:
            shared = await self._read_shared(labels, tenant, panel)
            if key not in self._shared or self._shared[key][1] < shared[1]:
                self._shared[key] = shared
        return (local, shared[0])

    async def _read_shared(
        self, labels: LabelLedger, tenant: str, panel: str,
    ) -> tuple[tuple[object, ...], float]:
        """:func:`.reports.data_version` and when (``monotonic``) its read began, one read in
        flight per (tenant, panel): polls arriving while it runs share it (it began before they
        arrived and ends after), so a crowd of pollers costs the store one read at a time."""
        key = (tenant, panel)
        task = self._versions.get(key)
        if task is None:
            self.version_reads += 1
            task = asyncio.ensure_future(self._timed_read(labels, tenant, panel))
            self._versions[key] = task
            task.add_done_callback(lambda done: self._version_read(key, done))
        return await asyncio.shield(task)

    async def _timed_read(self, labels: LabelLedger, tenant: str, panel: str) -> tuple[tuple[object, ...], float]:
        began = self.monotonic()
        return await data_version(labels, tenant, panel), began

    def _version_read(self, key: tuple[str, str], task: asyncio.Future[tuple[tuple[object, ...], float]]) -> None:
        if self._versions.get(key) is task:
            del self._versions[key]
        if not task.cancelled():
            task.exception()  # retrieved: every poll that shared it was answered with it

    def _settled(self, key: tuple[str, str, str, int], task: asyncio.Task[_Scan]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
        if not task.cancelled() and task.exception() is not None:
            log.debug("win rate scan of %s failed: %r", key[:3], task.exception())

    async def _scan(
        self, archive: RecordArchive, key: tuple[str, str, str, int], version: tuple[object, ...],
        now: float, since: float | None,
    ) -> _Scan:
        tenant, panel, field, _ = key
        async with self.reports.admit(tenant, REPORT):
            rows = _Rows(field)
            page: list[VerdictRecord] = []
            await archive.index_existing_records()
            async for record in archive.iter_records(tenant, panel=panel, since=since):
                page.append(record)
                if len(page) >= FOLD_RECORDS:
                    await self.reports.run(REPORT, rows.fold, page)
                    page = []
            await self.reports.run(REPORT, rows.fold, page)
            scan = await self.reports.run(REPORT, rows.freeze, version, now, since)
        self._scans[key] = scan
        while len(self._scans) > MAX_ENTRIES:
            self._scans.popitem(last=False)
        return scan
