"""The storage contract by concern: one small ABC each, so a caller can depend on only what it uses.

:class:`~judgefuse.service.storage.base.Storage` is their union, the one every backend
implements. Each public method is a template method: it checks its arguments once, here
(:mod:`.checks`; ``ValueError`` whichever backend serves), then calls the backend's hook of the
same name with a leading underscore (``save_verdict`` -> ``_save_verdict``), which may assume
valid input: checked names, increments already validated, times already read from the clock.

* :class:`Lifecycle`: ``open``, ``close``, ``ping``, ``async with``;
* :class:`VerdictStore`: ``save_verdict``, ``get_verdict``, ``iter_recent``;
* :class:`LabelLedger`: ``set_label``, ``undo_label``, ``read_accumulator``, ``list_accumulators``,
  ``iter_labelled``, ``count_labelled``;
* :class:`ReviewQueueStore`: ``lease_review``, ``release_review``, ``review_stats``;
* :class:`VersionedRecords`: thresholds, fusion models and monitor events (put, get, history),
  and the compare-and-set of the serving pair (``put_serving``);
* :class:`Coordination`: named leases, in-flight claims, compare-and-set state blobs;
* :class:`RecordArchive`: ``iter_records``, ``index_existing_records``, ``apply_retention``.

How a consumer takes them: one parameter per contract it uses, typed with that contract and
named after it (``verdicts: VerdictStore``, ``labels: LabelLedger``, ``versioned:
VersionedRecords``, ``coordination`` or ``leases: Coordination``, ``archive: RecordArchive``,
``lifecycle: Lifecycle``); the composition passes the same storage once per parameter
(``VerdictReads(storage, storage, panels)``). Not named intersections (a ``VerdictsAndLabels``
that :class:`Storage` also inherits): the pairs and triples consumers need would each add a
class to the union's bases, and a signature would no longer say which concern each call
serves. Only the composition roots take the whole ``Storage``: the app and the gateway, and
each slice's service object, which composes its slice and hands the store on
(``tests/test_storage_consumers.py`` holds that list).
"""

from __future__ import annotations

import abc
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from types import TracebackType
from typing import Any, Self

from judgefuse.service.storage.checks import (
    Increments,
    IncrementsFn,
    Number,
    V,
    VersionedKind,
    check_iter_args,
    check_label,
    check_lease,
    check_limit,
    check_name,
    check_named_lease,
    check_retention_args,
    check_serving_put,
    check_state_put,
    check_tenant,
    check_verdict_record,
    check_versioned,
    checked_increments,
    clock,
)
from judgefuse.service.storage.label_history import LabelEvent, check_label_by
from judgefuse.service.storage.local_writes import LocalWrites
from judgefuse.service.storage.records import (
    LabelKind,
    LabelOutcome,
    ModelRecord,
    MonitorEvent,
    ReviewLease,
    ServingVersions,
    StateBlob,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.retention import RetentionReport
from judgefuse.service.storage.verdict_query import VerdictCursor, VerdictPage, VerdictQuery, matches

__all__ = [
    "Coordination",
    "LabelLedger",
    "Lifecycle",
    "RecordArchive",
    "ReviewQueueStore",
    "VerdictStore",
    "VersionedRecords",
]


class WritesMarked:
    """``local_writes``: this process's writes through this object (:mod:`.local_writes`),
    marked by the template methods that write records."""

    @functools.cached_property
    def local_writes(self) -> LocalWrites:
        return LocalWrites()


class Lifecycle(abc.ABC):
    """Opening and closing a store (``async with storage:`` does both) and its health check."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- lifecycle -----------------------------------------------------------------------------
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect / open the file and create the schema if needed."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release connections and threads. Safe to call twice."""

    @abc.abstractmethod
    async def ping(self) -> bool:
        """True when the store answers (for /readyz). Never raises."""

    def reopen_url(self) -> str | None:
        """A URL from which another process opens this same store (the refit worker reads its
        labels itself: docs/design.md, 'Bounded learning'); None: it cannot (the default)."""
        return None


class VerdictStore(WritesMarked, abc.ABC):
    """Verdict records, scoped by tenant: a tenant never reads another tenant's record (the
    same id under another tenant is a different, usually absent, record). A save also enqueues
    the record for review and applies its traffic counters, in one atomic step."""

    # -- verdicts ------------------------------------------------------------------------------
    async def save_verdict(
        self,
        tenant: str,
        record: VerdictRecord,
        increments: Mapping[str, Mapping[str, Number]] | None = None,
    ) -> None:
        """Store a new verdict record (unlabelled), enqueue it for review if its stamp says so,
        and apply ``increments`` (accumulator key -> field -> delta) to the running totals and
        the hour bucket of ``record.created_at``: all in one atomic step.

        Saving the identical record again is a no-op (a retried request: no second enqueue, no
        second increment); a different record under an id the tenant already used raises
        :class:`VerdictExists`. ``record.tenant`` must equal ``tenant`` and ``record.label``
        must be ``None`` (labels go through :meth:`set_label`), else ``ValueError``.
        """
        check_verdict_record(tenant, record)
        try:
            await self._save_verdict(tenant, record, checked_increments(increments))
        finally:
            self.local_writes.mark(tenant, record.panel)

    @abc.abstractmethod
    async def _save_verdict(self, tenant: str, record: VerdictRecord, increments: Increments) -> None:
        """``save_verdict`` of a checked record with checked increments (maybe empty)."""

    async def get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        """The tenant's record with this id, or ``None``."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        return await self._get_verdict(tenant, verdict_id)

    @abc.abstractmethod
    async def _get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        """``get_verdict`` with checked arguments."""

    # -- recent records (labelled or not) ------------------------------------------------------
    async def iter_recent(self, tenant: str, panel: str, *, limit: int) -> list[VerdictRecord]:
        """The panel's newest ``limit`` records, labelled or not, newest ``created_at`` first
        (ties: id desc): the unlabelled votes a label-free fit (Dawid-Skene's cold start) reads.
        """
        check_tenant(tenant)
        check_limit(limit)
        check_name("panel", panel)
        return await self._iter_recent(tenant, panel, limit)

    async def _iter_recent(self, tenant: str, panel: str, limit: int) -> list[VerdictRecord]:
        """``iter_recent`` with checked arguments. Not abstract, so a backend without it still
        opens: the cold start then says so."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a panel's recent verdicts")

    # -- the console's verdict list (.verdict_query) -------------------------------------------
    async def list_verdicts(
        self,
        tenant: str,
        query: VerdictQuery,
        *,
        after: VerdictCursor | None = None,
        limit: int = 50,
        scan_limit: int = 2000,
    ) -> VerdictPage:
        """One page of the panel's verdicts that pass ``query``, newest first (ties: id desc),
        strictly older than ``after``: at most ``limit`` records, examining at most
        ``scan_limit`` (see :mod:`.verdict_query`, which also says why keyset, not offset)."""
        check_tenant(tenant)
        check_name("panel", query.panel)
        check_limit(limit)
        check_limit(scan_limit)
        if limit < 1 or scan_limit < limit:
            raise ValueError("list_verdicts needs 1 <= limit <= scan_limit")
        found: list[VerdictRecord] = []
        scanned = 0
        cursor = after
        while len(found) < limit and scanned < scan_limit:
            # unfiltered (only the index's own filters), every record read is one to show
            want = min(limit if query.indexed_only else max(limit * 2, 100), scan_limit - scanned)
            batch = await self._scan_verdicts(
                tenant, query.panel, query.since, query.until, query.index_labelled, cursor, want,
                oldest_first=query.oldest_first)
            consumed = 0
            for record in batch:
                consumed += 1
                cursor = VerdictCursor(created_at=record.created_at, id=record.id)
                if matches(record, query):
                    found.append(record)
                    if len(found) == limit:
                        break
            scanned += consumed
            if len(batch) < want and consumed == len(batch):  # the index has nothing older
                return VerdictPage(records=found, scanned=scanned, next=None)
        return VerdictPage(records=found, scanned=scanned, next=cursor)

    async def _scan_verdicts(
        self, tenant: str, panel: str, since: float | None, until: float | None,
        labelled: bool | None, before: VerdictCursor | None, limit: int, *,
        oldest_first: bool = False,
    ) -> list[VerdictRecord]:
        """The panel's next ``limit`` records strictly before ``before`` in (``created_at``,
        id) descending order (``oldest_first``: strictly after it, ascending), with
        ``since <= created_at < until`` and, when ``labelled`` is
        set, only labelled (True) or unlabelled (False) ones. Served from an index in that
        order; a backend may return records that fail the range or labelled filters (they are
        checked again), never skip one that passes. Not abstract, like ``_iter_recent``."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a panel's verdicts")


class LabelLedger(WritesMarked, abc.ABC):
    """Labels and the calibration accumulators they move: a label is stored on its record
    together with its accumulator increments (a relabel replaces, never double counts), and
    the accumulators are read back as running totals or hour windows."""

    # -- labels --------------------------------------------------------------------------------
    async def set_label(
        self,
        tenant: str,
        verdict_id: str,
        label: LabelKind,
        increments: IncrementsFn,
        *,
        labelled_at: float | None = None,
        comment: str | None = None,
        by: str | None = None,
    ) -> LabelOutcome:
        """Label a verdict and update the accumulators, atomically and idempotently.

        ``label`` is ``A``, ``B``, ``tie`` or ``both_bad`` (:data:`LabelKind`); ``comment`` an
        optional note stored with it (a new label replaces the old comment).
        ``increments(record, label)`` must be pure: it is called inside the atomic section,
        for the new label and (when relabelling) for the old one, whose result is subtracted;
        a backend may call it again when it retries (Redis) or on its worker thread (SQLite).
        The same label again (and no new comment) writes nothing.
        A first label also takes the verdict out of the review queue and ends any lease on it,
        in the same atomic step (the label wins, whoever held the lease).
        Raises :class:`VerdictNotFound` for an unknown id. ``labelled_at`` defaults to now.
        Whatever it writes also appends an entry to the verdict's label history (who: ``by``,
        never a secret), in the same atomic step (:mod:`.label_history`).
        """
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        check_label(label, comment)
        check_label_by(by)
        when = time.time() if labelled_at is None else float(labelled_at)
        try:
            outcome = await self._set_label(tenant, verdict_id, label, increments, when, comment, by=by)
        except BaseException:
            self.local_writes.mark(tenant)
            raise
        if outcome.status != "unchanged":
            self.local_writes.mark(tenant, outcome.record.panel)
        return outcome

    @abc.abstractmethod
    async def _set_label(
        self, tenant: str, verdict_id: str, label: LabelKind, increments: IncrementsFn,
        labelled_at: float, comment: str | None = None, *, by: str | None = None,
    ) -> LabelOutcome:
        """``set_label`` with checked arguments and the label's time."""

    async def label_history(self, tenant: str, verdict_id: str) -> list[LabelEvent]:
        """The verdict's label history, oldest first: every label, relabel, comment change
        and undo, the newest ``LABEL_HISTORY_KEEP`` of them; ``[]`` for an unlabelled or
        unknown verdict."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        return await self._label_history(tenant, verdict_id)

    async def _label_history(self, tenant: str, verdict_id: str) -> list[LabelEvent]:
        """``label_history`` with checked arguments. Not abstract, like ``_iter_recent``."""
        raise NotImplementedError(f"{type(self).__name__} keeps no label history")

    async def undo_label(
        self,
        tenant: str,
        verdict_id: str,
        increments: IncrementsFn,
        *,
        labelled_at: float,
        annotator: str,
        lease_s: float,
        now: float | None = None,
    ) -> VerdictRecord | None:
        """Take back the label set at ``labelled_at`` (the annotator page's undo), atomically:
        the record loses its label and comment, the label's increments are subtracted (the
        accumulators equal a recount without it), the stratum's labelled count goes down by
        one, and a queued verdict returns to the review queue, leased to ``annotator`` for
        ``lease_s`` seconds (so the page shows it again), and the history gains an ``undone``
        entry by ``annotator``. None, with nothing written, when the
        record's label is no longer the one set at ``labelled_at`` (relabelled or undone since).
        Raises :class:`VerdictNotFound` for an unknown id."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        _n, lease = check_lease(1, annotator, lease_s)
        at = clock(now)
        try:
            record = await self._undo_label(tenant, verdict_id, increments, float(labelled_at),
                                            annotator, at, at + lease)
        except BaseException:
            self.local_writes.mark(tenant)
            raise
        if record is not None:
            self.local_writes.mark(tenant, record.panel)
        return record

    async def _undo_label(
        self, tenant: str, verdict_id: str, increments: IncrementsFn, labelled_at: float,
        annotator: str, at: float, expires_at: float,
    ) -> VerdictRecord | None:
        """``undo_label`` with checked arguments. Not abstract, like ``_iter_recent``."""
        raise NotImplementedError(f"{type(self).__name__} cannot undo a label")

    # -- accumulators --------------------------------------------------------------------------
    async def read_accumulator(
        self,
        tenant: str,
        key: str,
        *,
        since_hour: int | None = None,
        until_hour: int | None = None,
    ) -> dict[str, Number]:
        """Summed fields of one accumulator; ``{}`` when none (ints stay exact ints).

        Without hours: the running total, O(fields). With ``since_hour`` (inclusive) and/or
        ``until_hour`` (exclusive), hours as :func:`hour_of` counts them: the sum of those hour
        buckets, O(buckets x fields). A field appears once any increment named it.
        """
        check_tenant(tenant)
        check_name("accumulator key", key)
        return await self._read_accumulator(tenant, key, since_hour, until_hour)

    @abc.abstractmethod
    async def _read_accumulator(
        self, tenant: str, key: str, since_hour: int | None, until_hour: int | None
    ) -> dict[str, Number]:
        """``read_accumulator`` with checked arguments."""

    async def list_accumulators(self, tenant: str, prefix: str = "") -> list[str]:
        """The tenant's accumulator keys starting with ``prefix``, sorted."""
        check_tenant(tenant)
        return sorted(await self._list_accumulators(tenant, prefix))

    @abc.abstractmethod
    async def _list_accumulators(self, tenant: str, prefix: str) -> list[str]:
        """The keys starting with ``prefix``, in any order (sorted by the caller in Python's
        code-point order, the same as Redis's byte order for UTF-8)."""

    # -- labelled records ----------------------------------------------------------------------
    async def iter_labelled(
        self, tenant: str, panel: str | None = None, *, limit: int | None = None
    ) -> list[VerdictRecord]:
        """Records labelled ``A`` or ``B`` (of one panel, or all), newest ``created_at`` first
        (ties: id desc). Ties and both-bad labels are left out: no fit, tuner or refit can use
        them as a preference."""
        check_tenant(tenant)
        check_limit(limit)
        if panel is not None:
            check_name("panel", panel)
        return await self._iter_labelled(tenant, panel, limit)

    @abc.abstractmethod
    async def _iter_labelled(
        self, tenant: str, panel: str | None, limit: int | None
    ) -> list[VerdictRecord]:
        """``iter_labelled`` with checked arguments."""

    async def count_labelled(self, tenant: str, panel: str | None = None) -> int:
        """How many of the tenant's records (of one panel, or all) carry an ``A`` or ``B`` label."""
        check_tenant(tenant)
        if panel is not None:
            check_name("panel", panel)
        return await self._count_labelled(tenant, panel)

    @abc.abstractmethod
    async def _count_labelled(self, tenant: str, panel: str | None) -> int:
        """``count_labelled`` with checked arguments."""


class ReviewQueueStore(abc.ABC):
    """The review queue per (tenant, panel): leases to annotators, skips, and its counters."""

    # -- review queue --------------------------------------------------------------------------
    async def lease_review(
        self,
        tenant: str,
        panel: str,
        *,
        n: int,
        annotator: str,
        lease_s: float,
        now: float | None = None,
    ) -> list[ReviewLease]:
        """Lease up to ``n`` free queued items of (tenant, panel) to ``annotator`` until
        ``now + lease_s``, lowest ``review.rank`` first (random order). Free: unlabelled and
        with no live lease (an expired lease frees the item, whoever held it). Atomic across
        concurrent callers and replicas: no item is ever leased to two annotators at once.
        ``n`` must be >= 1 and ``lease_s`` > 0 (else ``ValueError``). ``now`` defaults to the
        wall clock.
        """
        check_tenant(tenant)
        check_name("panel", panel)
        n, lease_s = check_lease(n, annotator, lease_s)
        at = clock(now)
        return await self._lease_review(tenant, panel, n, annotator, at, at + lease_s)

    @abc.abstractmethod
    async def _lease_review(
        self, tenant: str, panel: str, n: int, annotator: str, now: float, expires_at: float
    ) -> list[ReviewLease]:
        """``lease_review`` with checked arguments: leases held until ``expires_at``."""

    async def release_review(
        self, tenant: str, verdict_id: str, annotator: str, *, now: float | None = None
    ) -> bool:
        """End ``annotator``'s live lease on the item (a skip: it returns to the queue at its
        rank). False when the annotator holds no live lease on it (nothing is written)."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        check_name("annotator", annotator)
        return await self._release_review(tenant, verdict_id, annotator, clock(now))

    @abc.abstractmethod
    async def _release_review(
        self, tenant: str, verdict_id: str, annotator: str, now: float
    ) -> bool:
        """``release_review`` with checked arguments."""

    async def review_stats(
        self, tenant: str, panel: str, *, now: float | None = None
    ) -> dict[str, StratumCounts]:
        """Counts per stratum (``review``, ``audit``, ``none``; all three always present) of
        (tenant, panel). Cost independent of the number of verdicts (counters, not scans; the
        live leases are counted in an index, O(live leases) at most).

        Only records saved with a ``review`` stamp are counted: a record without one (from
        before the review loop) is never routed, queued or counted, also when labelled.
        ``labelled`` counts first labels (a relabel changes no count). ``now`` (default: the
        wall clock) decides which leases are live."""
        check_tenant(tenant)
        check_name("panel", panel)
        return await self._review_stats(tenant, panel, clock(now))

    @abc.abstractmethod
    async def _review_stats(self, tenant: str, panel: str, now: float) -> dict[str, StratumCounts]:
        """``review_stats`` with checked arguments."""


class VersionedRecords(abc.ABC):
    """Thresholds, fusion models and monitor events, versioned per (tenant, panel): each put
    gets the next version atomically; reads return the latest, a given version, or the history."""

    # -- thresholds, fusion models and monitor events ------------------------------------------
    async def put_threshold(self, tenant: str, panel: str, record: ThresholdRecord) -> int:
        """Store a new threshold version for (tenant, panel); returns its version (1, 2, ...)."""
        check_tenant(tenant)
        check_versioned(panel, record)
        return await self._put_versioned("threshold", tenant, panel, record)

    async def get_threshold(
        self, tenant: str, panel: str, *, version: int | None = None
    ) -> ThresholdRecord | None:
        """The latest threshold (or the given version), with ``version`` set; ``None`` if none."""
        check_tenant(tenant)
        check_name("panel", panel)
        return await self._get_versioned("threshold", ThresholdRecord, tenant, panel, version)

    async def threshold_history(self, tenant: str, panel: str) -> list[ThresholdRecord]:
        """Every threshold version for (tenant, panel), oldest first."""
        check_tenant(tenant)
        check_name("panel", panel)
        return await self._history("threshold", ThresholdRecord, tenant, panel)

    async def put_model(self, tenant: str, panel: str, record: ModelRecord) -> int:
        """Store a new fusion-model version for (tenant, panel); returns its version."""
        check_tenant(tenant)
        check_versioned(panel, record)
        return await self._put_versioned("model", tenant, panel, record)

    async def get_model(
        self, tenant: str, panel: str, *, version: int | None = None
    ) -> ModelRecord | None:
        """The latest model (or the given version), with ``version`` set; ``None`` if none."""
        check_tenant(tenant)
        check_name("panel", panel)
        return await self._get_versioned("model", ModelRecord, tenant, panel, version)

    async def model_history(self, tenant: str, panel: str) -> list[ModelRecord]:
        """Every model version for (tenant, panel), oldest first."""
        check_tenant(tenant)
        check_name("panel", panel)
        return await self._history("model", ModelRecord, tenant, panel)

    async def put_serving(
        self, tenant: str, panel: str, *, expected: ServingVersions,
        threshold: ThresholdRecord | None = None, model: ModelRecord | None = None,
    ) -> ServingVersions | None:
        """Compare-and-set of the serving pair (the latest threshold and the latest model, which
        together route every verdict): store ``threshold`` and/or ``model`` as the next versions
        of (tenant, panel) **iff** the latest versions are ``expected`` (0: none stored), in one
        atomic step; the new latest versions, or None (nothing written) when another writer
        got there first. With both, the model is stored with the threshold embedded, its
        version set (one record holds the pair).

        Why: a promotion, a tune or a rollback decides against the pair it read; written with
        ``put_threshold`` / ``put_model`` after a concurrent write of the other kind, the pair
        would serve a model with a threshold tuned for another method. Here the loser of such a
        race writes nothing, reads again and decides again."""
        check_tenant(tenant)
        check_serving_put(panel, expected, threshold, model)
        expected = ServingVersions(int(expected[0]), int(expected[1]))
        if threshold is not None and model is not None:
            embedded = threshold.model_copy(update={"version": expected.threshold + 1})
            model = model.model_copy(update={"threshold": embedded})
        return await self._put_serving(tenant, panel, expected, threshold, model)

    @abc.abstractmethod
    async def _put_serving(
        self, tenant: str, panel: str, expected: ServingVersions, threshold: ThresholdRecord | None,
        model: ModelRecord | None,
    ) -> ServingVersions | None:
        """``put_serving`` with checked arguments (the model's embedded threshold already set)."""

    async def put_monitor_event(self, tenant: str, panel: str, event: MonitorEvent) -> int:
        """Append a monitor event for (tenant, panel); returns its version (1, 2, ...)."""
        check_tenant(tenant)
        check_versioned(panel, event)
        return await self._put_versioned("monitor_event", tenant, panel, event)

    async def monitor_events(
        self, tenant: str, panel: str, *, limit: int | None = None
    ) -> list[MonitorEvent]:
        """The newest ``limit`` (all when None) monitor events of (tenant, panel), oldest first."""
        check_limit(limit)
        check_tenant(tenant)
        check_name("panel", panel)
        events = await self._history("monitor_event", MonitorEvent, tenant, panel)
        return events if limit is None else events[len(events) - limit:] if limit else []

    @abc.abstractmethod
    async def _put_versioned(self, kind: VersionedKind, tenant: str, panel: str, record: V) -> int:
        """Store ``record`` as the next version of its kind for (tenant, panel), atomically;
        its version. The record's panel is checked to be ``panel``."""

    @abc.abstractmethod
    async def _get_versioned(
        self, kind: VersionedKind, cls: type[V], tenant: str, panel: str, version: int | None
    ) -> V | None:
        """The latest (or the given) version of a kind, parsed as ``cls`` with ``version`` set."""

    @abc.abstractmethod
    async def _history(self, kind: VersionedKind, cls: type[V], tenant: str, panel: str) -> list[V]:
        """Every version of a kind for (tenant, panel), oldest first, parsed as ``cls``."""


class Coordination(abc.ABC):
    """What replicas coordinate through: named leases (one job at a time), in-flight claims
    (single-flight judging) and compare-and-set state blobs."""

    # -- named leases (one job at a time across replicas) --------------------------------------
    async def acquire_lease(
        self, tenant: str, name: str, owner: str, *, ttl_s: float, now: float | None = None
    ) -> bool:
        """Hold the named lease of ``tenant`` until ``now + ttl_s``: True when it was free,
        expired, or already ``owner``'s (then renewed); False while another owner holds it
        (nothing is written). Atomic across concurrent callers and replicas. Times are the
        caller's clock (``now`` defaults to the wall clock), so replicas need synced clocks.
        ``ttl_s`` must be > 0 (else ``ValueError``)."""
        check_tenant(tenant)
        ttl = check_named_lease(name, owner, ttl_s)
        return await self._acquire_lease(tenant, name, owner, ttl, clock(now))

    @abc.abstractmethod
    async def _acquire_lease(
        self, tenant: str, name: str, owner: str, ttl_s: float, now: float
    ) -> bool:
        """``acquire_lease`` with checked arguments."""

    async def release_lease(self, tenant: str, name: str, owner: str) -> bool:
        """Free the named lease if ``owner`` holds it (True); otherwise write nothing (False)."""
        check_tenant(tenant)
        check_name("lease name", name)
        check_name("lease owner", owner)
        return await self._release_lease(tenant, name, owner)

    @abc.abstractmethod
    async def _release_lease(self, tenant: str, name: str, owner: str) -> bool:
        """``release_lease`` with checked arguments."""

    # -- in-flight claims (single-flight idempotency) ------------------------------------------
    async def claim_verdict_id(
        self, tenant: str, verdict_id: str, owner: str, ttl_s: float
    ) -> bool:
        """Claim the right to judge (tenant, id) for ``ttl_s`` seconds: True when ``owner`` holds
        the claim now (newly taken, or already its own: then the lease is extended).

        Backends shared by several processes (Redis) implement a real lease, so only one replica
        calls the judges for an id while the others wait for its verdict
        (:mod:`judgefuse.service.judging.single_flight`). A single-process backend (SQLite) always says
        True: the gateway's in-process map of requests in flight is enough there.
        """
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        return await self._claim_verdict_id(tenant, verdict_id, owner, ttl_s)

    async def _claim_verdict_id(self, tenant: str, verdict_id: str, owner: str, ttl_s: float) -> bool:
        """``claim_verdict_id`` with checked arguments; a backend without claims says True."""
        return True

    async def release_verdict_id(self, tenant: str, verdict_id: str, owner: str) -> None:
        """Drop ``owner``'s claim on (tenant, id) (someone else's is left alone). A backend
        whose claims always succeed (SQLite) holds none: nothing to drop by default."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        await self._release_verdict_id(tenant, verdict_id, owner)

    async def _release_verdict_id(self, tenant: str, verdict_id: str, owner: str) -> None:
        """``release_verdict_id`` with checked arguments; nothing to drop by default."""
        return None

    async def verdict_id_claimed(self, tenant: str, verdict_id: str) -> bool:
        """True while any process holds a claim on (tenant, id)."""
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        return await self._verdict_id_claimed(tenant, verdict_id)

    async def _verdict_id_claimed(self, tenant: str, verdict_id: str) -> bool:
        """``verdict_id_claimed`` with checked arguments; never by default."""
        return False

    # -- state blobs (compare-and-set) ---------------------------------------------------------
    async def get_state(self, tenant: str, key: str) -> StateBlob | None:
        """The state blob under ``key`` with its version, or ``None`` when none was written."""
        check_tenant(tenant)
        check_name("state key", key)
        return await self._get_state(tenant, key)

    @abc.abstractmethod
    async def _get_state(self, tenant: str, key: str) -> StateBlob | None:
        """``get_state`` with checked arguments."""

    async def put_state(
        self, tenant: str, key: str, body: dict[str, Any], *, expected_version: int
    ) -> int | None:
        """Compare-and-set: write ``body`` as version ``expected_version + 1`` iff the stored
        version is ``expected_version`` (0: no blob yet); return the new version, or ``None``
        (nothing written) when another writer got there first. Atomic across replicas, so a
        read-modify-write loop on it never loses an update."""
        check_tenant(tenant)
        text = check_state_put(key, body, expected_version)
        return await self._put_state(tenant, key, text, expected_version)

    @abc.abstractmethod
    async def _put_state(self, tenant: str, key: str, body: str, expected_version: int) -> int | None:
        """``put_state`` with checked arguments, the body as its JSON text."""


class RecordArchive(WritesMarked, abc.ABC):
    """Export and retention: streaming every record in order, and deleting the old ones."""

    # -- export and retention ------------------------------------------------------------------
    async def iter_records(
        self,
        tenant: str | None = None,
        *,
        panel: str | None = None,
        since: float | None = None,      # created_at >= since
        until: float | None = None,      # created_at < until
        labelled_only: bool = False,
        batch_size: int = 1000,
    ) -> AsyncIterator[VerdictRecord]:
        """Stream verdict records (every tenant when ``tenant`` is None) in (created_at, tenant, id)
        ascending order, ``batch_size`` rows per query by keyset pagination: constant memory on
        millions of rows; records written during the scan may or may not appear. The arguments
        are checked before the first query (when the first record is asked for).
        ``labelled_only``: records with an ``A`` or ``B`` label, like ``iter_labelled``."""
        check_iter_args(tenant, panel, since, until, batch_size)
        records = self._iter_records(tenant, panel, since, until, labelled_only, batch_size)
        async with contextlib.aclosing(records):
            async for record in records:
                yield record

    @abc.abstractmethod
    async def _iter_records(
        self, tenant: str | None, panel: str | None, since: float | None, until: float | None,
        labelled_only: bool, batch_size: int,
    ) -> AsyncGenerator[VerdictRecord, None]:
        """``iter_records`` with checked arguments (an async generator)."""
        raise NotImplementedError
        yield  # unreachable: makes this an async generator, like the backends

    async def index_existing_records(self) -> int:
        """Make records saved before ``iter_records`` existed visible to it and to
        ``apply_retention``; how many were indexed. A backend whose scans read its tables
        directly (SQLite) has nothing to do. Cheap once done: callers run it before each scan."""
        return 0

    async def apply_retention(
        self, *, older_than: float, keep_labelled: int, now: float | None = None
    ) -> RetentionReport:
        """Delete verdict records with created_at < older_than (every tenant), except records pending
        review (queued and unlabelled) and, per (tenant, panel), the newest ``keep_labelled`` labelled
        records (the refit's window). Accumulators, counters, thresholds, models, state blobs and
        monitor events are never touched. Idempotent; safe to run while traffic is served."""
        cutoff, keep = check_retention_args(older_than, keep_labelled)
        clock(now)  # checked for the contract; the cut-off is the caller's
        try:
            return await self._apply_retention(cutoff, keep)
        finally:
            self.local_writes.mark()

    @abc.abstractmethod
    async def _apply_retention(self, older_than: float, keep_labelled: int) -> RetentionReport:
        """``apply_retention`` with checked arguments."""
