"""Redis storage: state shared between gateway replicas (docs/design.md, 'Scale').

Key naming
----------
Every key of a tenant ``T`` starts with ``jf:{T}:``. The braces are a Redis Cluster hash tag:
all of a tenant's keys live in one slot, so the Lua scripts (``lua/*.lua``) may touch any of them (and a
cluster spreads tenants, not a tenant's keys). Tenant names cannot contain braces (see
``check_tenant``).

=====================================  =====================================================
key                                    content
=====================================  =====================================================
``jf:{T}:v:{id}``                      string: the verdict record's JSON (label included)
``jf:{T}:records``                     sorted set: every record's id, score = ``created_at``
``jf:{T}:labelled``                    sorted set: ids labelled A or B, score = ``created_at``
``jf:{T}:labelled:p:{panel}``          sorted set: the same per panel
``jf:{T}:recent:p:{panel}``            sorted set: the newest ``recent_cap`` verdict ids (labelled
                                       or not), score = ``created_at`` (``iter_recent``)
``jf:{T}:acc:keys``                    sorted set (scores 0, read by lex range): accumulator keys
``jf:{T}:acc:total:{key}``             hash: field -> running total (HINCRBYFLOAT)
``jf:{T}:acc:hours:{key}``             sorted set: the hour buckets that exist, score = hour
``jf:{T}:acc:hour:{hour}:{key}``       hash: field -> total of that hour bucket
``jf:{T}:claim:{id}``                  string: the replica judging this id now (PX lease)
``jf:{T}:thrseq:{panel}``              integer: the last threshold version
``jf:{T}:thr:{panel}``                 hash: version -> threshold JSON (without ``version``)
``jf:{T}:modelseq:{panel}``            integer: the last fusion-model version
``jf:{T}:model:{panel}``               hash: version -> model JSON (without ``version``)
``jf:{T}:state:{key}``                 hash: ``version``, ``body`` (a state blob, compare-and-set)
``jf:{T}:meventseq:{panel}``           integer: the last monitor-event version
``jf:{T}:mevent:{panel}``              hash: version -> monitor event JSON (without ``version``)
``jf:{T}:review:queue:{panel}``        sorted set: queued unlabelled ids, score = stamp ``rank``
``jf:{T}:review:stratum:{panel}``      hash: queued id -> its stratum (``review``/``audit``)
``jf:{T}:review:owner:{panel}``        hash: leased id -> annotator (live leases only)
``jf:{T}:review:leases:{s}:{panel}``   sorted set per queued stratum: leased ids, score = expiry
``jf:{T}:review:counts:{panel}``       hash: ``routed:{s}``, ``inqueue:{s}``, ``labelled:{s}``
``jf:{T}:lh:{id}``                     list: the verdict's label history, oldest first (JSON
                                       entries, the newest ``LABEL_HISTORY_KEEP``), appended by
                                       the label and undo scripts
``jf:tenants``                         set: every tenant that saved a verdict (no hash tag:
                                       written beside the save script, once per process)
=====================================  =====================================================

The review keys' fixed words before the panel differ, so no panel name can make two of them
collide.

Atomicity
---------
``set_label`` is optimistic compare-and-set: read the record, compute the net increments in
Python (the caller's function), then one Lua script checks that the record is still the one
read (its SHA-1), and only then writes the labelled record, the labelled indexes and every
HINCRBY/HINCRBYFLOAT; otherwise nothing is written and the call re-reads and retries. A script runs
alone on the server, so concurrent labels of one id are serialised: the same label twice is a
no-op and a relabel subtracts exactly what the previous label added. Version numbers come from
INCR inside the script that stores the version. Saving a verdict is a script too (create, or
no-op when identical, or :class:`VerdictExists`): the create also counts the record in its
stratum, enqueues it (when its stamp says so) and applies the traffic increments, so a retried
save enqueues and counts nothing twice. A first label of a stamped record counts the label and
removes the item from the queue and its lease in the label's script.

The review queue: ``lease_review`` is one script that sweeps expired leases (after which an
item has an owner exactly when it has a live lease), reads the first ``n`` + (live leases)
ids in rank order (enough to find ``n`` free ones) and leases the free ones; scripts run one
at a time on the server, so two callers, on one replica or two, never lease one item.
``release_review`` is a script that checks owner and expiry before it removes the lease.
``review_stats`` reads the counters and ZCOUNTs the live leases in one MULTI. Lease times are
the callers' clocks (``now``): replicas should keep their clocks in sync (NTP); a skew only
shortens or lengthens a lease by that much.

Integer deltas use HINCRBY (exact int64, as the calibration accumulator's fixed-point fields
need); float deltas HINCRBYFLOAT (a field that holds a float stays a float). Increments are
validated before the script; the script checks every field for overflow (int64, or 1e300 for
floats) before its first write and refuses the whole label with :class:`AccumulatorOverflow`,
so a label is never half applied (Redis does not roll a failed script back).

Retention
---------
``iter_records`` pages through ``records`` (or, with ``labelled_only``, the labelled index)
by (score, id) keyset, reads the bodies with MGET and merges the tenants' streams in
(created_at, tenant, id) order. ``apply_retention`` walks ``records`` below the cut-off, keeps
the records pending review (queued and unlabelled) and, per panel, the labelled ones at or
after the ``keep_labelled``-th newest of ``labelled:p:{panel}``, and deletes the rest with a
script that first checks the record is still the one read (a label in between wins: the record
stays for the next pass) and removes it from ``records`` and both labelled indexes, so no index
holds a dangling id. Review counters, accumulators and hour buckets are never touched.

With ``record_ttl_s`` (the service passes ``retention_days``) a record that is not queued also
gets an expiry at ``created_at + record_ttl_s`` when it is saved, so Redis frees it by itself
even if no retention pass runs; a queued record gets none (pending review is never dropped),
and a label removes any expiry (PERSIST), so labels leave only through ``apply_retention``,
which knows the refit's window. An expired record is never labelled nor queued, so it is in
no labelled index and not in the queue; only its ``records`` entry is left, which the scan
skips and the next pass removes (counted in ``dropped``). Records saved before this version
are not in ``records`` (nor their tenant in ``jf:tenants``) until ``index_existing_records``
has run once (the retention job and ``judgefuse export`` run it first; it marks the store
``jf:records-indexed``); they get no TTL. Apart from that, nothing here expires but the
in-flight claims and named leases.
Float sums are computed by HINCRBYFLOAT (long double, stored with 17 significant digits), so
for values that are not exact binary fractions they may differ from SQLite's in the last bits;
integer sums are identical on both backends.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import json
import math
import re
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any, cast

import redis.asyncio as aioredis
import redis.exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialWithJitterBackoff

from judgefuse.service.storage.base import Storage
from judgefuse.service.storage.checks import (
    Increments,
    IncrementsFn,
    Number,
    V,
    VersionedKind,
    hour_of,
    label_status,
    label_unchanged,
    labelled_copy,
    net_increments,
    parse_record,
    parse_records,
    parse_state,
    parse_versioned,
    pending_review,
    stats_from_counters,
    unlabelled_copy,
)
from judgefuse.service.storage.errors import (
    AccumulatorOverflow,
    StorageCorrupt,
    StorageError,
    StorageUnavailable,
    VerdictExists,
    VerdictNotFound,
)
from judgefuse.service.storage.label_history import (
    LABEL_HISTORY_KEEP,
    LabelEvent,
    event_body,
    parse_label_event,
)
from judgefuse.service.storage.paging import PageSizer
from judgefuse.service.storage.records import (
    DECIDED,
    LabelKind,
    LabelOutcome,
    ModelRecord,
    ReviewLease,
    ServingVersions,
    StateBlob,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)
from judgefuse.service.storage.retention import RetentionReport
from judgefuse.service.storage.url_secrets import redact_url as _redact_url
from judgefuse.service.storage.url_secrets import secret_forms
from judgefuse.service.storage.verdict_query import VerdictCursor

_VERSIONED_KEYS: dict[VersionedKind, str] = {"threshold": "thr", "model": "model", "monitor_event": "mevent"}
_INT_RE = re.compile(r"^-?[0-9]+$")
TENANTS_KEY = "jf:tenants"
"""Set of every tenant that saved a verdict (``iter_records`` and ``apply_retention`` over every
tenant read it). Outside any tenant's hash slot, so it is written beside the save script, not in
it: once per tenant and process, before the tenant's first save, so no record exists whose
tenant is missing from it."""
RETENTION_BATCH = 1000
RECORDS_INDEXED_KEY = "jf:records-indexed"
"""Set once ``index_existing_records`` has put every older record into its tenant's
``records`` index (records saved since are indexed by the save script)."""


def lua(name: str) -> str:
    """The Lua script ``lua/<name>.lua`` of this package (each file says its KEYS, ARGV and
    replies). The save and label scripts start with ``increments.lua``, whose ``plan()`` and
    ``apply()`` they call."""
    text = resources.files("judgefuse.service.storage.redis").joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")
    if name in ("label", "unlabel"):  # ... and history.lua's append_history()
        return lua("increments") + lua("history") + text
    if name == "save":
        return lua("increments") + text
    return text

_NOT_RETRYABLE = (rexc.AuthenticationError, rexc.AuthorizationError, rexc.NoPermissionError)
_RETRYABLE = (
    rexc.ConnectionError,
    rexc.TimeoutError,
    rexc.ClusterDownError,
    rexc.TryAgainError,
    rexc.MaxConnectionsError,
    rexc.ReadOnlyError,
    OSError,
    TimeoutError,
)


def _text(value: str | bytes | Any) -> str:
    """A reply value as text. The client decodes replies (``decode_responses=True``), but
    redis-py types them ``bytes | str``; bytes would mean a client built otherwise."""
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _number(value: str | bytes) -> Number:
    """A stored field: an integer string is an exact int (HINCRBY), anything else a float."""
    text = _text(value)
    return int(text) if _INT_RE.match(text) else float(text)


def redact_url(url: str) -> str:
    """The URL with its password (if any) replaced by ``***``."""
    return _redact_url(url, "redis")


class RedisStorage(Storage):
    """Storage in Redis via ``redis.asyncio`` (see the module docstring for keys and atomicity).

    ``open()`` builds the client without contacting the server; ``ping()`` tells whether it
    answers, and any operation on an unreachable server raises :class:`StorageUnavailable`.
    ``retries`` is redis-py's own retry of a failed connection (with jittered backoff).
    """

    def __init__(
        self,
        url: str,
        *,
        socket_timeout_s: float = 5.0,
        connect_timeout_s: float = 2.0,
        retries: int = 2,
        max_cas_attempts: int = 200,
        recent_cap: int = 20_000,
        record_ttl_s: float | None = None,
        max_connections: int = 64,
        pool_timeout_s: float = 5.0,
    ) -> None:
        if record_ttl_s is not None and not (math.isfinite(record_ttl_s) and record_ttl_s > 0):
            raise ValueError(f"record_ttl_s must be a positive number of seconds, got {record_ttl_s!r}")
        self.record_ttl_s = record_ttl_s
        self._tenants_seen: set[str] = set()
        self._url = url
        self.recent_cap = recent_cap
        """Newest verdict ids kept per panel for :meth:`iter_recent` (older ids are trimmed)."""
        self.safe_url = redact_url(url)
        self._secrets = secret_forms(url)
        self.socket_timeout_s = socket_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.retries = retries
        self.max_cas_attempts = max_cas_attempts
        self.max_connections = max_connections
        """Connections in the pool (the URL's ``?max_connections=`` wins)."""
        self.pool_timeout_s = pool_timeout_s
        """How long a call waits for a free connection (the URL's ``?timeout=`` wins)."""
        self._client: aioredis.Redis | None = None

    def __repr__(self) -> str:
        return f"RedisStorage({self.safe_url!r})"

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        try:
            yield
        except StorageError:
            raise
        except _NOT_RETRYABLE as exc:
            message = self._scrub(f"redis at {self.safe_url}: {what}: {type(exc).__name__}: {exc}")
            raise StorageError(message) from exc
        except _RETRYABLE as exc:
            message = self._scrub(
                f"redis at {self.safe_url} unavailable: {what}: {type(exc).__name__}: {exc}"
            )
            raise StorageUnavailable(message) from exc
        except rexc.RedisError as exc:
            message = self._scrub(f"redis at {self.safe_url}: {what}: {type(exc).__name__}: {exc}")
            raise StorageError(message) from exc

    @property
    def client(self) -> aioredis.Redis:
        if self._client is None:
            raise StorageError("redis storage is not open")
        return self._client

    # -- lifecycle -----------------------------------------------------------------------------
    async def open(self) -> None:
        if self._client is not None:
            return
        with self._errors("open"):
            try:
                # a bounded pool whose callers wait for a free connection (up to
                # pool_timeout_s, then StorageUnavailable: 503) instead of failing at once when
                # a burst needs more; the URL may size it: ?max_connections=N&timeout=S
                pool = aioredis.BlockingConnectionPool.from_url(
                    self._url,
                    decode_responses=True,
                    socket_timeout=self.socket_timeout_s,
                    socket_connect_timeout=self.connect_timeout_s,
                    retry=Retry(ExponentialWithJitterBackoff(base=0.05, cap=0.5), self.retries),
                    max_connections=self.max_connections,
                    timeout=self.pool_timeout_s,
                )
                client = aioredis.Redis(connection_pool=pool)
                client.auto_close_connection_pool = True  # aclose() closes the pool with it
            except ValueError as exc:
                raise StorageError(f"invalid redis url {self.safe_url}: {exc}") from exc
        self._client = client
        self._save_script = client.register_script(lua("save"))
        self._label_script = client.register_script(lua("label"))
        self._unlabel_script = client.register_script(lua("unlabel"))
        self._put_script = client.register_script(lua("put_versioned"))
        self._put_serving_script = client.register_script(lua("put_serving"))
        self._put_state_script = client.register_script(lua("put_state"))
        self._lease_script = client.register_script(lua("lease_review"))
        self._release_script = client.register_script(lua("release_review"))
        self._acquire_named_script = client.register_script(lua("acquire_lease"))
        self._release_named_script = client.register_script(lua("release_lease"))
        self._claim_script = client.register_script(lua("claim"))
        self._drop_script = client.register_script(lua("drop"))
        self._release_claim_script = client.register_script(lua("release_claim"))

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with self._errors("close"):
                await client.aclose()

    def reopen_url(self) -> str | None:
        return self._url

    async def ping(self) -> bool:
        if self._client is None:
            return False
        try:
            return bool(await self._client.ping())
        except (rexc.RedisError, OSError, TimeoutError):  # any failure: not ready
            return False

    # -- keys ----------------------------------------------------------------------------------
    @staticmethod
    def _k(tenant: str, *parts: str | int) -> str:
        return ":".join([f"jf:{{{tenant}}}", *(str(p) for p in parts)])

    # -- verdicts ------------------------------------------------------------------------------
    def _review_keys(self, tenant: str, panel: str) -> dict[str, str]:
        """The review-queue keys of (tenant, panel) (see the key table)."""
        return {
            "counts": self._k(tenant, "review", "counts", panel),
            "queue": self._k(tenant, "review", "queue", panel),
            "strata": self._k(tenant, "review", "stratum", panel),
            "owners": self._k(tenant, "review", "owner", panel),
            "leases:review": self._k(tenant, "review", "leases", "review", panel),
            "leases:audit": self._k(tenant, "review", "leases", "audit", panel),
        }

    def _add_increments(
        self, tenant: str, hour: int, net: Increments, keys: list[str], args: list[str]
    ) -> None:
        """Append ``net``'s accumulators to a script's KEYS and ARGV (the layout ``plan``
        reads: three keys and name, field count, field, delta, ... per accumulator)."""
        for key, fields in net.items():
            keys += [
                self._k(tenant, "acc", "total", key),
                self._k(tenant, "acc", "hours", key),
                self._k(tenant, "acc", "hour", hour, key),
            ]
            args += [key, str(len(fields))]
            for field, delta in fields.items():
                args += [field, repr(delta)]

    async def _save_verdict(self, tenant: str, record: VerdictRecord, net: Increments) -> None:
        hour = hour_of(record.created_at)
        review = self._review_keys(tenant, record.panel)
        stamp = record.review
        keys = [
            self._k(tenant, "v", record.id),
            review["counts"],
            review["queue"],
            review["strata"],
            self._k(tenant, "acc", "keys"),
            self._recent_key(tenant, record.panel),
            self._k(tenant, "records"),
        ]
        queued = stamp is not None and stamp.queued
        expire_ms = ""
        if self.record_ttl_s is not None and not queued:
            expire_ms = str(int((record.created_at + self.record_ttl_s) * 1000))
        args = [
            record.model_dump_json(),
            record.id,
            "" if stamp is None else stamp.stratum,
            "1" if queued else "0",
            repr(0.0 if stamp is None else stamp.rank),
            str(hour),
            repr(float(record.created_at)),
            str(self.recent_cap),
            expire_ms,
        ]
        self._add_increments(tenant, hour, net, keys, args)
        await self._register_tenant(tenant)
        with self._errors("save_verdict"):
            result = int(await self._save_script(keys=keys, args=args))
        if result == -1:
            raise VerdictExists(tenant, record.id)
        if result == -2:
            raise AccumulatorOverflow(
                f"save_verdict of {record.id!r}: an accumulator field would overflow"
            )

    async def _get_verdict(self, tenant: str, verdict_id: str) -> VerdictRecord | None:
        with self._errors("get_verdict"):
            raw = await self.client.get(self._k(tenant, "v", verdict_id))
        return None if raw is None else parse_record(raw, "redis")

    # -- in-flight claims ----------------------------------------------------------------------
    async def _claim_verdict_id(self, tenant: str, verdict_id: str, owner: str, ttl_s: float) -> bool:
        ttl_ms = max(1, int(ttl_s * 1000))
        with self._errors("claim_verdict_id"):
            held = await self._claim_script(
                keys=[self._k(tenant, "claim", verdict_id)], args=[owner, ttl_ms]
            )
        return int(held) == 1

    async def _release_verdict_id(self, tenant: str, verdict_id: str, owner: str) -> None:
        with self._errors("release_verdict_id"):
            await self._release_claim_script(keys=[self._k(tenant, "claim", verdict_id)], args=[owner])

    async def _verdict_id_claimed(self, tenant: str, verdict_id: str) -> bool:
        with self._errors("verdict_id_claimed"):
            return bool(await self.client.exists(self._k(tenant, "claim", verdict_id)))

    # -- labels --------------------------------------------------------------------------------
    async def _set_label(
        self, tenant: str, verdict_id: str, label: LabelKind, increments: IncrementsFn, when: float,
        comment: str | None = None, *, by: str | None = None,
    ) -> LabelOutcome:
        record_key = self._k(tenant, "v", verdict_id)
        for _ in range(self.max_cas_attempts):
            with self._errors("set_label"):
                raw = await self.client.get(record_key)
            if raw is None:
                raise VerdictNotFound(tenant, verdict_id)
            record = parse_record(raw, "redis")
            if label_unchanged(record, label, comment):
                return LabelOutcome(status="unchanged", label=label, previous=label, record=record)
            net = net_increments(record, label, increments)
            new = labelled_copy(record, label, when, comment)
            hour = hour_of(record.created_at)
            review = self._review_keys(tenant, record.panel)
            keys = [
                record_key,
                self._k(tenant, "labelled"),
                self._k(tenant, "labelled", "p", record.panel),
                self._k(tenant, "acc", "keys"),
                review["counts"],
                review["queue"],
                review["strata"],
                review["owners"],
                review["leases:review"],
                review["leases:audit"],
                self._k(tenant, "lh", verdict_id),
            ]
            first_stamped = record.label is None and record.review is not None
            args: list[str] = [
                hashlib.sha1(_text(raw).encode("utf-8")).hexdigest(),
                new.model_dump_json(),
                repr(record.created_at),
                verdict_id,
                str(hour),
                record.review.stratum if first_stamped and record.review is not None else "",
                "1" if label in DECIDED else "0",
                event_body(record, label_status(record, label), label, when, comment, by),
                str(LABEL_HISTORY_KEEP),
            ]
            self._add_increments(tenant, hour, net, keys, args)
            with self._errors("set_label"):
                result = int(await self._label_script(keys=keys, args=args))
            if result == 1:
                return LabelOutcome(
                    status=label_status(record, label),
                    label=label,
                    previous=record.label,
                    record=new,
                    applied=net,
                )
            if result == -2:
                raise AccumulatorOverflow(
                    f"set_label on {verdict_id!r}: an accumulator field would overflow"
                )
            if result < 0:
                raise VerdictNotFound(tenant, verdict_id)
            await asyncio.sleep(0)  # the record changed under us: re-read and retry
        raise StorageUnavailable(
            f"set_label on {verdict_id!r}: still contended after {self.max_cas_attempts} attempts"
        )

    async def _undo_label(
        self, tenant: str, verdict_id: str, increments: IncrementsFn, labelled_at: float,
        annotator: str, at: float, expires_at: float,
    ) -> VerdictRecord | None:
        record_key = self._k(tenant, "v", verdict_id)
        for _ in range(self.max_cas_attempts):
            with self._errors("undo_label"):
                raw = await self.client.get(record_key)
            if raw is None:
                raise VerdictNotFound(tenant, verdict_id)
            record = parse_record(raw, "redis")
            if record.label is None or record.labelled_at != labelled_at:
                return None
            net = net_increments(record, None, increments)
            new = unlabelled_copy(record)
            hour = hour_of(record.created_at)
            review = self._review_keys(tenant, record.panel)
            keys = [record_key, self._k(tenant, "labelled"),
                    self._k(tenant, "labelled", "p", record.panel), self._k(tenant, "acc", "keys"),
                    review["counts"], review["queue"], review["strata"], review["owners"],
                    review["leases:review"], review["leases:audit"],
                    self._k(tenant, "lh", verdict_id)]
            stamp = record.review
            args: list[str] = [
                hashlib.sha1(_text(raw).encode("utf-8")).hexdigest(), new.model_dump_json(),
                verdict_id, str(hour), stamp.stratum if stamp is not None else "",
                "1" if stamp is not None and stamp.queued else "0",
                repr(stamp.rank if stamp is not None else 0.0), annotator, repr(expires_at),
                event_body(record, None, None, at, None, annotator), str(LABEL_HISTORY_KEEP),
            ]
            self._add_increments(tenant, hour, net, keys, args)
            with self._errors("undo_label"):
                result = int(await self._unlabel_script(keys=keys, args=args))
            if result == 1:
                return new
            if result == -2:
                raise AccumulatorOverflow(
                    f"undo_label on {verdict_id!r}: an accumulator field would overflow")
            if result < 0:
                raise VerdictNotFound(tenant, verdict_id)
            await asyncio.sleep(0)  # the record changed under us: re-read and retry
        raise StorageUnavailable(
            f"undo_label on {verdict_id!r}: still contended after {self.max_cas_attempts} attempts"
        )

    async def _label_history(self, tenant: str, verdict_id: str) -> list[LabelEvent]:
        with self._errors("label_history"):
            entries = await self.client.lrange(self._k(tenant, "lh", verdict_id), 0, -1)
        return [parse_label_event(None, entry, "redis") for entry in entries]

    # -- review queue --------------------------------------------------------------------------
    async def _lease_review(
        self, tenant: str, panel: str, n: int, annotator: str, at: float, expires_at: float
    ) -> list[ReviewLease]:
        review = self._review_keys(tenant, panel)
        keys = [review[k] for k in ("queue", "strata", "owners", "leases:review", "leases:audit")]
        with self._errors("lease_review"):
            ids = await self._lease_script(
                keys=keys, args=[repr(at), repr(expires_at), annotator, str(n)]
            )
            if not ids:
                return []
            raws = await self.client.mget([self._k(tenant, "v", _text(i)) for i in ids])
        leases = []
        for vid, raw in zip(ids, raws, strict=True):
            if raw is None:
                raise StorageCorrupt(f"redis: queued verdict {vid!r} has no record")
            leases.append(
                ReviewLease(
                    record=parse_record(raw, "redis"),
                    annotator=annotator,
                    lease_expires_at=expires_at,
                )
            )
        return leases

    async def _release_review(self, tenant: str, verdict_id: str, annotator: str, at: float) -> bool:
        record = await self._get_verdict(tenant, verdict_id)  # for its panel (never rewritten)
        if record is None or record.review is None or not record.review.queued:
            return False
        review = self._review_keys(tenant, record.panel)
        keys = [review[k] for k in ("strata", "owners", "leases:review", "leases:audit")]
        with self._errors("release_review"):
            result = await self._release_script(
                keys=keys, args=[verdict_id, annotator, repr(at)]
            )
        return int(result) == 1

    async def _review_stats(self, tenant: str, panel: str, at: float) -> dict[str, StratumCounts]:
        review = self._review_keys(tenant, panel)
        with self._errors("review_stats"):
            async with self.client.pipeline(transaction=True) as pipe:  # one snapshot
                pipe.hgetall(review["counts"])
                pipe.zcount(review["leases:review"], f"({at!r}", "+inf")
                pipe.zcount(review["leases:audit"], f"({at!r}", "+inf")
                raw, live_review, live_audit = await pipe.execute()
        counters = {field: int(value) for field, value in raw.items()}
        return stats_from_counters(counters, {"review": live_review, "audit": live_audit})

    # -- named leases ----------------------------------------------------------------------------
    async def _acquire_lease(self, tenant: str, name: str, owner: str, ttl: float, at: float) -> bool:
        # the key also expires on the server (an hour after the lease) so dead leases vanish
        keep_ms = int((ttl + 3600) * 1000)
        with self._errors("acquire_lease"):
            result = await self._acquire_named_script(
                keys=[self._k(tenant, "lease", name)],
                args=[owner, repr(at), repr(at + ttl), str(keep_ms)],
            )
        return int(result) == 1

    async def _release_lease(self, tenant: str, name: str, owner: str) -> bool:
        with self._errors("release_lease"):
            result = await self._release_named_script(keys=[self._k(tenant, "lease", name)], args=[owner])
        return int(result) == 1

    # -- accumulators --------------------------------------------------------------------------
    async def _read_accumulator(
        self, tenant: str, key: str, since_hour: int | None, until_hour: int | None
    ) -> dict[str, Number]:
        with self._errors("read_accumulator"):
            if since_hour is None and until_hour is None:
                raw = await self.client.hgetall(self._k(tenant, "acc", "total", key))
                return {_text(field): _number(value) for field, value in raw.items()}
            low = "-inf" if since_hour is None else str(int(since_hour))
            high = "+inf" if until_hour is None else f"({int(until_hour)}"
            hours = await self.client.zrangebyscore(self._k(tenant, "acc", "hours", key), low, high)
            if not hours:
                return {}
            async with self.client.pipeline(transaction=False) as pipe:
                for hour in hours:
                    pipe.hgetall(self._k(tenant, "acc", "hour", _text(hour), key))
                buckets = await pipe.execute()
        total: dict[str, Number] = {}
        for bucket in buckets:
            for field, value in bucket.items():
                number = _number(value)
                total[field] = total[field] + number if field in total else number
        return total

    async def _list_accumulators(self, tenant: str, prefix: str) -> list[str]:
        with self._errors("list_accumulators"):
            keys = await self.client.zrange(self._k(tenant, "acc", "keys"), 0, -1)
        return [name for name in map(_text, keys) if name.startswith(prefix)]

    # -- versioned records ---------------------------------------------------------------------
    async def _put_versioned(self, what: VersionedKind, tenant: str, panel: str, record: V) -> int:
        kind = _VERSIONED_KEYS[what]
        with self._errors(f"put {kind}"):
            version = await self._put_script(
                keys=[self._k(tenant, f"{kind}seq", panel), self._k(tenant, kind, panel)],
                args=[record.model_dump_json(exclude={"version"})],
            )
        return int(version)

    async def _put_serving(
        self, tenant: str, panel: str, expected: ServingVersions, threshold: ThresholdRecord | None,
        model: ModelRecord | None,
    ) -> ServingVersions | None:
        keys = [self._k(tenant, f"{kind}{part}", panel) for kind in ("thr", "model") for part in ("seq", "")]
        bodies = ["" if r is None else r.model_dump_json(exclude={"version"}) for r in (threshold, model)]
        with self._errors("put_serving"):
            t, m = await self._put_serving_script(keys=keys, args=[*map(str, expected), *bodies])
        return None if int(t) < 0 else ServingVersions(int(t), int(m))

    async def _get_versioned(
        self, what: VersionedKind, cls: type[V], tenant: str, panel: str, version: int | None
    ) -> V | None:
        kind = _VERSIONED_KEYS[what]
        with self._errors(f"get {kind}"):
            if version is None:
                latest = await self.client.get(self._k(tenant, f"{kind}seq", panel))
                if latest is None:
                    return None
                version = int(latest)
            raw = await self.client.hget(self._k(tenant, kind, panel), str(int(version)))
        return None if raw is None else parse_versioned(cls, int(version), raw, "redis")

    async def _history(self, what: VersionedKind, cls: type[V], tenant: str, panel: str) -> list[V]:
        kind = _VERSIONED_KEYS[what]
        with self._errors(f"{kind} history"):
            raw = await self.client.hgetall(self._k(tenant, kind, panel))
        return [parse_versioned(cls, int(v), raw[v], "redis") for v in sorted(raw, key=int)]

    # -- state blobs -----------------------------------------------------------------------------
    async def _get_state(self, tenant: str, key: str) -> StateBlob | None:
        with self._errors("get_state"):
            version, body = await self.client.hmget(self._k(tenant, "state", key), ["version", "body"])
        if version is None or body is None:
            return None
        return parse_state(version, body, key, "redis")

    async def _put_state(self, tenant: str, key: str, text: str, expected_version: int) -> int | None:
        with self._errors("put_state"):
            result = int(await self._put_state_script(
                keys=[self._k(tenant, "state", key)], args=[str(expected_version), text]))
        return None if result < 0 else result

    # -- labelled records ----------------------------------------------------------------------
    def _labelled_key(self, tenant: str, panel: str | None) -> str:
        if panel is None:
            return self._k(tenant, "labelled")
        return self._k(tenant, "labelled", "p", panel)

    async def _iter_labelled(
        self, tenant: str, panel: str | None, limit: int | None
    ) -> list[VerdictRecord]:
        if limit == 0:
            return []
        index = self._labelled_key(tenant, panel)
        with self._errors("iter_labelled"):
            ids = await self.client.zrevrange(index, 0, -1 if limit is None else limit - 1)
            if not ids:
                return []
            raws = await self.client.mget([self._k(tenant, "v", _text(i)) for i in ids])
        return await parse_records(raws, "redis")

    def _recent_key(self, tenant: str, panel: str) -> str:
        return self._k(tenant, "recent", "p", panel)

    async def _iter_recent(self, tenant: str, panel: str, limit: int) -> list[VerdictRecord]:
        if limit == 0:
            return []
        with self._errors("iter_recent"):
            ids = await self.client.zrevrange(self._recent_key(tenant, panel), 0, limit - 1)
            if not ids:
                return []
            raws = await self.client.mget([self._k(tenant, "v", _text(i)) for i in ids])
        return await parse_records(raws, "redis")

    async def _scan_verdicts(
        self, tenant: str, panel: str, since: float | None, until: float | None,
        labelled: bool | None, before: VerdictCursor | None, limit: int, *,
        oldest_first: bool = False,
    ) -> list[VerdictRecord]:
        """Labelled: the panel's labelled index; otherwise the tenant's ``records`` index, whose
        records of other panels come back too (``list_verdicts`` filters them and counts them as
        examined): there is no complete per-panel index (``recent:p`` is capped)."""
        key = self._labelled_key(tenant, panel) if labelled else self._k(tenant, "records")
        at = None if before is None else (before.created_at, before.id)
        out: list[VerdictRecord] = []
        while len(out) < limit:
            want = limit - len(out)
            page = await self._index_page(key, since, until, at, want, descending=not oldest_first,
                                          what="list_verdicts")
            if not page:
                break
            with self._errors("list_verdicts"):
                raws = await self.client.mget([self._k(tenant, "v", vid) for vid, _ in page])
            # an expired or deleted record is passed over, never the end of the list
            out += await parse_records(raws, "redis")
            if len(page) < want:
                break
            at = (page[-1][1], page[-1][0])
        return out

    async def _count_labelled(self, tenant: str, panel: str | None) -> int:
        index = self._labelled_key(tenant, panel)
        with self._errors("count_labelled"):
            return int(await self.client.zcard(index))

    # -- export and retention ------------------------------------------------------------------
    async def _register_tenant(self, tenant: str) -> None:
        if tenant in self._tenants_seen:
            return
        with self._errors("save_verdict"):
            await self.client.sadd(TENANTS_KEY, tenant)
        self._tenants_seen.add(tenant)

    async def index_existing_records(self) -> int:
        """Records saved before the ``records`` index (and the tenant set) existed: SCAN for
        ``jf:{T}:v:*`` once, add each to its tenant's index (score = its ``created_at``) and
        its tenant to the set, then mark the store done. Idempotent (ZADD, SADD), so replicas
        racing through it do no harm; after the mark it costs one GET."""
        with self._errors("index_existing_records"):
            if await self.client.exists(RECORDS_INDEXED_KEY):
                return 0
            indexed = 0
            keys: list[str] = []
            async for key in self.client.scan_iter(match="jf:{*}:v:*", count=1000):
                keys.append(_text(key))
                if len(keys) >= 1000:
                    indexed += await self._index_keys(keys)
                    keys.clear()
            indexed += await self._index_keys(keys)
            await self.client.set(RECORDS_INDEXED_KEY, "1")
        return indexed

    async def _index_keys(self, keys: list[str]) -> int:
        entries: list[tuple[str, str, float]] = []  # tenant, id, created_at
        raws = await self.client.mget(keys) if keys else []
        for key, raw in zip(keys, raws, strict=True):
            close = key.find("}")  # tenant names hold no braces: the first closes the tag
            if raw is None or close < 0 or not key.startswith(":v:", close + 1):
                continue
            try:
                data = json.loads(raw)
                entries.append((key[4:close], key[close + 4:], float(data["created_at"])))
            except (ValueError, TypeError, KeyError):
                continue  # not a verdict record (an id with '}:v:' in another key's name)
        if entries:
            async with self.client.pipeline(transaction=False) as pipe:
                for tenant, vid, created_at in entries:
                    pipe.zadd(self._k(tenant, "records"), {vid: created_at})
                    pipe.sadd(TENANTS_KEY, tenant)
                await pipe.execute()
        return len(entries)

    async def _tenants(self) -> list[str]:
        with self._errors("tenants"):
            return sorted(_text(t) for t in await self.client.smembers(TENANTS_KEY))

    async def _index_page(
        self, key: str, low: float | None, high: float | None, after: tuple[float, str] | None,
        n: int, *, descending: bool = False, what: str = "iter_records",
    ) -> list[tuple[str, float]]:
        """The next ``n`` (id, score) of a sorted set in (score, id) order after ``after``, with
        ``low <= score < high``. Keyset pagination: the rest of ``after``'s tie group (members
        of one score are in id order) is read first, then the scores above it; no offset into
        the whole set, so a page costs O(log N + n) however far the scan is. ``descending``:
        the same backwards, strictly before ``after`` (the console's newest-first list)."""
        low_arg = "-inf" if low is None else repr(float(low))
        high_arg = "+inf" if high is None else f"({high!r}"
        read = self.client.zrevrangebyscore if descending else self.client.zrangebyscore

        def pairs(chunk: Any) -> list[tuple[str, float]]:
            return [(_text(m), float(sc)) for m, sc in cast(list[tuple[Any, Any]], chunk)]

        with self._errors(what):
            if after is None:
                bounds = (high_arg, low_arg) if descending else (low_arg, high_arg)
                return pairs(await read(key, *bounds, start=0, num=n, withscores=True))[:n]
            score, last = after
            if descending:
                high_arg = f"({score!r}"
            else:
                low_arg = f"({score!r}"
            bounds = (high_arg, low_arg) if descending else (low_arg, high_arg)
            # one round trip: the cursor's tie group and the first n past it, in one pipeline
            # (two reads and the bodies' MGET apart would cost three: docs/benchmarks.md)
            async with self.client.pipeline(transaction=False) as pipe:
                side = pipe.zrevrangebyscore if descending else pipe.zrangebyscore
                side(key, repr(score), repr(score), start=0, num=n, withscores=True)
                side(key, *bounds, start=0, num=n, withscores=True)
                chunk, rest = await pipe.execute()
            out: list[tuple[str, float]] = []
            offset = 0
            while True:
                offset += len(chunk)
                out += [(m, sc) for m, sc in pairs(chunk) if (m < last if descending else m > last)]
                if len(chunk) < n or len(out) >= n:  # the tie group read to its end, or enough
                    break
                chunk = await read(key, repr(score), repr(score), start=offset, num=n, withscores=True)
            return (out + pairs(rest))[:n]

    async def _tenant_records(
        self, tenant: str, panel: str | None, since: float | None, until: float | None,
        labelled_only: bool, batch_size: int,
    ) -> AsyncIterator[VerdictRecord]:
        """One tenant's records in (created_at, id) order: the labelled index (of the panel)
        with ``labelled_only``, else the records index (panel filtered on the bodies)."""
        key = self._labelled_key(tenant, panel) if labelled_only else self._k(tenant, "records")
        after: tuple[float, str] | None = None
        sizer = PageSizer(batch_size)  # bounded by bytes too (storage/paging.py)
        while True:
            limit = sizer.rows
            page = await self._index_page(key, since, until, after, limit)
            if not page:
                return
            with self._errors("iter_records"):
                raws = await self.client.mget([self._k(tenant, "v", vid) for vid, _ in page])
            sizer.observe(len(raws), sum(len(raw) for raw in raws if raw is not None))
            # None: expired (record TTL) or deleted since the page was read; parsed a page at a
            # time, in a worker thread when large (checks.PARSE_OFF_LOOP_BYTES)
            for record in await parse_records(raws, "redis"):
                if panel is not None and record.panel != panel:
                    continue
                if labelled_only and record.label not in DECIDED:
                    continue
                yield record
            if len(page) < limit:
                return
            after = (page[-1][1], page[-1][0])

    async def _iter_records(
        self, tenant: str | None, panel: str | None, since: float | None, until: float | None,
        labelled_only: bool, batch_size: int,
    ) -> AsyncGenerator[VerdictRecord, None]:
        tenants = [tenant] if tenant is not None else await self._tenants()
        streams = [
            self._tenant_records(t, panel, since, until, labelled_only, batch_size)
            for t in tenants
        ]
        # a k-way merge of the tenants' ordered streams: O(tenants) records in memory
        heap: list[tuple[float, str, str, int, VerdictRecord]] = []
        for index, stream in enumerate(streams):
            first = await anext(stream, None)
            if first is not None:
                heap.append((first.created_at, first.tenant, first.id, index, first))
        heapq.heapify(heap)
        while heap:
            _, _, _, index, record = heap[0]
            yield record
            following = await anext(streams[index], None)
            if following is None:
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (following.created_at, following.tenant, following.id,
                                         index, following))

    async def _keep_bound(self, tenant: str, panel: str, keep: int) -> tuple[float, str] | None:
        """(created_at, id) of the ``keep``-th newest labelled record of (tenant, panel), the
        order ``iter_labelled`` reads; None when there are fewer (all are kept)."""
        with self._errors("apply_retention"):
            rows = await self.client.zrevrange(
                self._labelled_key(tenant, panel), keep - 1, keep - 1, withscores=True)
        return None if not rows else (float(rows[0][1]), _text(rows[0][0]))

    async def _apply_retention(self, cutoff: float, keep: int) -> RetentionReport:
        dropped = pending = labelled = 0
        for tenant in await self._tenants():
            index = self._k(tenant, "records")
            bounds: dict[str, tuple[float, str] | None] = {}
            after: tuple[float, str] | None = None
            while True:
                page = await self._index_page(index, None, cutoff, after, RETENTION_BATCH)
                if not page:
                    break
                with self._errors("apply_retention"):
                    raws = await self.client.mget([self._k(tenant, "v", vid) for vid, _ in page])
                drops: list[tuple[str, str, str | None]] = []  # id, sha1 as read, panel
                for (vid, _score), raw in zip(page, raws, strict=True):
                    if raw is None:  # expired by its TTL: only its index entry is left
                        drops.append((vid, "", None))
                        continue
                    record = parse_record(raw, "redis")
                    if pending_review(record):
                        pending += 1
                        continue
                    if record.label is not None and keep > 0:
                        if record.panel not in bounds:
                            bounds[record.panel] = await self._keep_bound(tenant, record.panel, keep)
                        bound = bounds[record.panel]
                        if bound is None or (record.created_at, record.id) >= bound:
                            labelled += 1
                            continue
                    drops.append((vid, hashlib.sha1(_text(raw).encode("utf-8")).hexdigest(),
                                  record.panel))
                dropped += await self._drop(tenant, drops)
                if len(page) < RETENTION_BATCH:
                    break
                after = (page[-1][1], page[-1][0])
        return RetentionReport(dropped=dropped, kept_pending=pending, kept_labelled=labelled)

    async def _drop(self, tenant: str, drops: list[tuple[str, str, str | None]]) -> int:
        """Delete records (each only if unchanged since read) with their index entries, one
        pipelined script call per record; how many went. A record labelled or relabelled in
        between is left for the next pass."""
        if not drops:
            return 0
        with self._errors("apply_retention"):
            async with self.client.pipeline(transaction=False) as pipe:
                for vid, sha, panel in drops:
                    labelled = self._k(tenant, "labelled")
                    by_panel = labelled if panel is None else self._k(tenant, "labelled", "p", panel)
                    await self._drop_script(
                        keys=[self._k(tenant, "v", vid), self._k(tenant, "records"), labelled,
                              by_panel, self._k(tenant, "lh", vid)],
                        args=[vid, sha], client=pipe)
                results = await pipe.execute()
        return sum(1 for result in results if int(result) == 1)

