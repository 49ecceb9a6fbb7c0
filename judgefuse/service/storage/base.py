"""The storage interface the service uses, its typed errors, and helpers both backends share.

Two backends implement :class:`Storage` with the same behaviour (one test suite runs on both):
:class:`~judgefuse.service.storage.sqlite.SQLiteStorage` (the embedded default, one file) and
:class:`~judgefuse.service.storage.redis.RedisStorage` (state shared between gateway replicas).

What is stored
--------------
* **Verdict records**, scoped by tenant: a tenant never reads another tenant's record (the
  same id under another tenant is a different, usually absent, record).
* **Labels**, idempotent (docs/design.md, 'Live calibration'): :meth:`Storage.set_label` stores the
  label on the record and, in the same atomic step, applies the accumulator increments the
  caller's pure function gives for the new label, minus the increments for the old label when
  the record was already labelled (a relabel replaces, never double counts). The same label
  twice writes nothing. Concurrent calls on one id are serialised by the backend.
* **Accumulators**: per (tenant, accumulator key), named float fields summed by storage without
  understanding them (``judgefuse.calibration`` owns their meaning). Each key keeps a running
  total and per-hour buckets, so a window read is O(buckets x fields), never O(labels). A label's
  increments go to the hour bucket of the *verdict's* ``created_at`` (``hour_of``), so a relabel
  subtracts from and adds to the same bucket.
* **Traffic counters**: ``save_verdict`` may carry increments (same shape as a label's) that
  are applied, in the same atomic step as the insert and only when the record is new, to the
  running total and the hour bucket of ``created_at``: the per-stratum verdict counts N_s the
  population estimates need (docs/design.md, 'The review loop').
* **The review queue** per (tenant, panel): a new record whose ``review`` stamp says
  ``queued`` enters it in the same atomic step as the insert, ordered by its random ``rank``.
  :meth:`Storage.lease_review` leases the lowest-ranked free items to one annotator (atomic:
  two annotators never hold the same item; an expired lease frees the item);
  :meth:`Storage.set_label` removes the item and ends any lease (the label wins, whoever holds
  the lease); :meth:`Storage.release_review` gives a skipped item back.
* **In-flight claims** (optional, for backends shared between replicas): a short lease per
  (tenant, verdict id) held by the replica judging it (:meth:`Storage.claim_verdict_id`).
* **Thresholds** and **fusion models**, versioned per (tenant, panel): each put gets the next
  version atomically; reads return the latest, a given version, or the history.

Errors
------
Backend exceptions are mapped at the boundary to :class:`StorageError` and its subclasses,
raised ``from`` the original. Messages never carry credentials (a Redis URL's password is
redacted). Programming errors (a bad tenant name, a record whose tenant does not match, a
non-finite increment) are ``ValueError``. An exception raised by the caller's ``increments``
function propagates unchanged and nothing is written.
"""

from __future__ import annotations

import abc
import contextlib
import math
import numbers
import re
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

from judgefuse.judges.types import Letter
from judgefuse.service.storage.records import (
    LabelOutcome,
    ModelRecord,
    MonitorEvent,
    ReviewLease,
    StateBlob,
    Stratum,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.retention import RetentionReport

Number = int | float
"""A field value. Integer deltas are summed as exact 64-bit integers (the calibration
accumulator's fixed-point fields rely on it); float deltas as floats. A field that ever
received a float delta holds a float from then on."""

Increments = dict[str, dict[str, Number]]
"""accumulator key -> field -> delta."""

IncrementsFn = Callable[[VerdictRecord, Letter], Mapping[str, Mapping[str, Number]]]
"""A pure function: the increments one label of one record adds (storage negates it to remove)."""

INT64_MAX = 2**63 - 1

VersionedKind = Literal["threshold", "model", "monitor_event"]
"""What a versioned record is: each kind is numbered 1, 2, ... per (tenant, panel)."""

V = TypeVar("V", ThresholdRecord, ModelRecord, MonitorEvent)

_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class StorageError(Exception):
    """Any storage failure. Not retryable unless it is a :class:`StorageUnavailable`."""


class StorageUnavailable(StorageError):
    """The store cannot be reached or is busy (connection refused, timeout, lock). Retryable."""


class VerdictNotFound(StorageError):
    """No verdict with this id under this tenant."""

    def __init__(self, tenant: str, verdict_id: str) -> None:
        super().__init__(f"verdict {verdict_id!r} not found for tenant {tenant!r}")
        self.tenant = tenant
        self.verdict_id = verdict_id


class VerdictExists(StorageError):
    """``save_verdict`` with an id the tenant already used for a different record."""

    def __init__(self, tenant: str, verdict_id: str) -> None:
        super().__init__(f"verdict {verdict_id!r} already exists for tenant {tenant!r}")
        self.tenant = tenant
        self.verdict_id = verdict_id


class AccumulatorOverflow(StorageError):
    """A label would push an integer field beyond int64 (or a float beyond 1e300).

    Nothing of that label was written. Bucket or rotate accumulators long before this.
    """


class StorageCorrupt(StorageError):
    """Stored data cannot be read back (not a database, a malformed file, an invalid record)."""


def check_tenant(tenant: str) -> str:
    """Refuse tenant names that could break key naming (Redis hash tags, separators)."""
    if not isinstance(tenant, str) or not _TENANT_RE.match(tenant):
        raise ValueError(
            "tenant must be 1-128 characters of letters, digits, '_', '.', '-' "
            f"(starting with a letter or digit), got {tenant!r}"
        )
    return tenant


def check_name(kind: str, value: str) -> str:
    """Ids, panels and accumulator keys: any non-empty string up to 256 characters."""
    if not isinstance(value, str) or not value or len(value) > 256:
        raise ValueError(f"{kind} must be a non-empty string of at most 256 characters")
    return value


def hour_of(epoch_seconds: float) -> int:
    """The hour bucket of a time: whole hours since the epoch (UTC)."""
    return int(epoch_seconds // 3600)


def _checked(increments: Mapping[str, Mapping[str, Number]], sign: int) -> Increments:
    out: Increments = {}
    for key, fields in increments.items():
        check_name("accumulator key", key)
        row: dict[str, Number] = {}
        for field, delta in fields.items():
            if not isinstance(field, str) or not field:
                raise ValueError(f"accumulator {key!r}: field names must be non-empty strings")
            value: Number
            if isinstance(delta, numbers.Integral):  # int, bool, numpy integers: exact
                value = int(delta)
                if abs(value) > INT64_MAX:
                    raise ValueError(f"accumulator {key!r} field {field!r}: {delta} exceeds int64")
            else:
                value = float(delta)
                if not math.isfinite(value):
                    raise ValueError(
                        f"accumulator {key!r} field {field!r}: non-finite delta {delta!r}"
                    )
            row[field] = sign * value
        out[key] = row
    return out


def checked_increments(increments: Mapping[str, Mapping[str, Number]] | None) -> Increments:
    """``save_verdict``'s traffic increments, validated (names, finite values, int64) before
    anything is written; ``None`` is no increments."""
    return {} if increments is None else _checked(increments, 1)


def net_increments(
    record: VerdictRecord, new_label: Letter, increments: IncrementsFn
) -> Increments:
    """What setting ``new_label`` on ``record`` writes: new increments minus the old label's.

    Every field either side names is present in the result (a field may net to 0), so both
    backends create the same fields; int deltas stay ints. Called inside the atomic section.
    """
    net = _checked(increments(record, new_label), 1)
    if record.label is not None:
        for key, fields in _checked(increments(record, record.label), -1).items():
            row = net.setdefault(key, {})
            for field, delta in fields.items():
                row[field] = row[field] + delta if field in row else delta
    return net


def labelled_copy(record: VerdictRecord, label: Letter, labelled_at: float) -> VerdictRecord:
    """The record with its new label."""
    return record.model_copy(update={"label": label, "labelled_at": labelled_at})


class Storage(abc.ABC):
    """Async storage for verdicts, labels, calibration accumulators, thresholds and models.

    Use ``await storage.open()`` / ``await storage.close()`` or ``async with storage:``.

    Template methods: each public method checks its arguments here, once (``ValueError`` for a
    bad tenant, name, limit...), then calls the backend's hook of the same name with a leading
    underscore (``save_verdict`` -> ``_save_verdict``), which may assume valid input: checked
    names, increments already validated, times already read from the clock.
    """

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
        await self._save_verdict(tenant, record, checked_increments(increments))

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

    # -- labels --------------------------------------------------------------------------------
    async def set_label(
        self,
        tenant: str,
        verdict_id: str,
        label: Letter,
        increments: IncrementsFn,
        *,
        labelled_at: float | None = None,
    ) -> LabelOutcome:
        """Label a verdict and update the accumulators, atomically and idempotently.

        ``increments(record, label)`` must be pure: it is called inside the atomic section,
        for the new label and (when relabelling) for the old one, whose result is subtracted;
        a backend may call it again when it retries (Redis) or on its worker thread (SQLite).
        The same label again writes nothing.
        A first label also takes the verdict out of the review queue and ends any lease on it,
        in the same atomic step (the label wins, whoever held the lease).
        Raises :class:`VerdictNotFound` for an unknown id. ``labelled_at`` defaults to now.
        """
        check_tenant(tenant)
        check_name("verdict id", verdict_id)
        if label not in ("A", "B"):
            raise ValueError(f"label must be 'A' or 'B', got {label!r}")
        when = time.time() if labelled_at is None else float(labelled_at)
        return await self._set_label(tenant, verdict_id, label, increments, when)

    @abc.abstractmethod
    async def _set_label(
        self, tenant: str, verdict_id: str, label: Letter, increments: IncrementsFn,
        labelled_at: float,
    ) -> LabelOutcome:
        """``set_label`` with checked arguments and the label's time."""

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

    # -- thresholds and fusion models ------------------------------------------------------------
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

    # -- in-flight claims (single-flight idempotency) -----------------------------------------
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

    # -- labelled records ----------------------------------------------------------------------
    async def iter_labelled(
        self, tenant: str, panel: str | None = None, *, limit: int | None = None
    ) -> list[VerdictRecord]:
        """Labelled records (of one panel, or all), newest ``created_at`` first (ties: id desc)."""
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
        """How many of the tenant's records (of one panel, or all) carry a label."""
        check_tenant(tenant)
        if panel is not None:
            check_name("panel", panel)
        return await self._count_labelled(tenant, panel)

    @abc.abstractmethod
    async def _count_labelled(self, tenant: str, panel: str | None) -> int:
        """``count_labelled`` with checked arguments."""

    # -- recent records (labelled or not) --------------------------------------------------------
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

    # -- export and retention -------------------------------------------------------------------
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
        are checked before the first query (when the first record is asked for)."""
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
        return await self._apply_retention(cutoff, keep)

    @abc.abstractmethod
    async def _apply_retention(self, older_than: float, keep_labelled: int) -> RetentionReport:
        """``apply_retention`` with checked arguments."""


def check_verdict_record(tenant: str, record: VerdictRecord) -> None:
    """``save_verdict``'s preconditions, shared by the backends."""
    check_tenant(tenant)
    if record.tenant != tenant:
        raise ValueError(f"record.tenant {record.tenant!r} does not match tenant {tenant!r}")
    if record.label is not None or record.labelled_at is not None:
        raise ValueError("save_verdict stores unlabelled records: use set_label for the label")


def check_versioned(panel: str, record: ThresholdRecord | ModelRecord | MonitorEvent) -> None:
    """``put_threshold`` / ``put_model`` / ``put_monitor_event`` preconditions."""
    check_name("panel", panel)
    if record.panel != panel:
        raise ValueError(f"record.panel {record.panel!r} does not match panel {panel!r}")


STRATA: tuple[Stratum, ...] = ("review", "audit", "none", "inline")
"""Every stratum, in the order ``review_stats`` reports them."""


def check_lease(n: int, annotator: str, lease_s: float) -> tuple[int, float]:
    """``lease_review``'s arguments, checked: ``n`` a positive integer, ``annotator`` a name,
    ``lease_s`` finite and positive. Returns them as plain (int, float)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    check_name("annotator", annotator)
    if isinstance(lease_s, bool) or not isinstance(lease_s, numbers.Real):
        raise ValueError(f"lease_s must be a number of seconds, got {lease_s!r}")
    if not math.isfinite(lease_s) or lease_s <= 0:
        raise ValueError(f"lease_s must be finite and > 0, got {lease_s!r}")
    return int(n), float(lease_s)


def clock(now: float | None) -> float:
    """``now`` as float epoch seconds, the wall clock when ``None``."""
    if now is None:
        return time.time()
    value = float(now)
    if not math.isfinite(value):
        raise ValueError(f"now must be finite epoch seconds, got {now!r}")
    return value


def stats_from_counters(
    counters: Mapping[str, int], live_leases: Mapping[str, int]
) -> dict[str, StratumCounts]:
    """``review_stats``' answer from the stored counters and the live-lease counts.

    ``counters`` holds ``routed:<stratum>``, ``inqueue:<stratum>`` (queued and unlabelled, leased
    or not) and ``labelled:<stratum>``; ``live_leases`` stratum -> leases not yet expired.
    Every stratum is present; ``queued`` is the items in the queue that no live lease holds.
    """
    out: dict[str, StratumCounts] = {}
    for stratum in STRATA:
        leased = int(live_leases.get(stratum, 0))
        inqueue = int(counters.get(f"inqueue:{stratum}", 0))
        out[stratum] = StratumCounts(
            routed=int(counters.get(f"routed:{stratum}", 0)),
            queued=inqueue - leased,
            leased=leased,
            labelled=int(counters.get(f"labelled:{stratum}", 0)),
        )
    return out


def check_named_lease(name: str, owner: str, ttl_s: float) -> float:
    """``acquire_lease``'s preconditions, shared by the backends; the ttl as a float."""
    check_name("lease name", name)
    check_name("lease owner", owner)
    ttl = float(ttl_s)
    if not math.isfinite(ttl) or ttl <= 0:
        raise ValueError(f"ttl_s must be a positive number of seconds, got {ttl_s!r}")
    return ttl


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 0:
        raise ValueError("limit must be >= 0")


def check_state_put(key: str, body: Any, expected_version: int) -> str:
    """``put_state``'s preconditions, shared by the backends; the body as JSON."""
    import json

    check_name("state key", key)
    if isinstance(expected_version, bool) or not isinstance(expected_version, int) or (
            expected_version < 0):
        raise ValueError(f"expected_version must be an integer >= 0, got {expected_version!r}")
    if not isinstance(body, dict):
        raise ValueError("state body must be a JSON object (a dict)")
    return json.dumps(body, allow_nan=False, separators=(",", ":"))


def check_iter_args(
    tenant: str | None, panel: str | None, since: float | None, until: float | None,
    batch_size: int,
) -> None:
    """``iter_records``' arguments, checked before the first query (shared by the backends)."""
    if tenant is not None:
        check_tenant(tenant)
    if panel is not None:
        check_name("panel", panel)
    for name, value in (("since", since), ("until", until)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                  or not math.isfinite(value)):
            raise ValueError(f"{name} must be finite epoch seconds, got {value!r}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")


def check_retention_args(older_than: float, keep_labelled: int) -> tuple[float, int]:
    """``apply_retention``'s arguments, checked (shared by the backends)."""
    if isinstance(older_than, bool) or not isinstance(older_than, numbers.Real) or not math.isfinite(
            older_than):
        raise ValueError(f"older_than must be finite epoch seconds, got {older_than!r}")
    if isinstance(keep_labelled, bool) or not isinstance(keep_labelled, numbers.Integral) or (
            keep_labelled < 0):
        raise ValueError(f"keep_labelled must be an integer >= 0, got {keep_labelled!r}")
    return float(older_than), int(keep_labelled)


def pending_review(record: VerdictRecord) -> bool:
    """Whether ``record`` waits for review: queued at decision time and not labelled yet (a
    first label is what takes an item out of the queue, so the two always agree)."""
    return record.label is None and record.review is not None and record.review.queued

