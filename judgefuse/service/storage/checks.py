"""The storage contract's argument checks, value types and the helpers every backend shares.

:class:`~judgefuse.service.storage.base.Storage`'s public methods call the ``check_*``
functions once, before any backend hook runs (template method): a bad argument is a
``ValueError`` whichever backend serves. The rest (``net_increments``, ``hour_of``,
``stats_from_counters``...) is logic the backends would otherwise each write again.
"""

from __future__ import annotations

import asyncio
import json
import math
import numbers
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from judgefuse.judges.types import LABEL_KINDS, spelled
from judgefuse.service.storage.errors import StorageCorrupt
from judgefuse.service.storage.records import (
    COMMENT_MAX_CHARS,
    DECIDED,
    LabelKind,
    ModelRecord,
    MonitorEvent,
    StateBlob,
    Stratum,
    StratumCounts,
    ThresholdRecord,
    VerdictRecord,
)

__all__ = [
    "INT64_MAX",
    "Increments",
    "IncrementsFn",
    "Number",
    "STRATA",
    "V",
    "VersionedKind",
    "check_iter_args",
    "check_label",
    "check_lease",
    "check_limit",
    "check_name",
    "check_named_lease",
    "check_retention_args",
    "check_state_put",
    "check_tenant",
    "check_verdict_record",
    "check_versioned",
    "checked_increments",
    "clock",
    "hour_of",
    "label_status",
    "label_unchanged",
    "labelled_copy",
    "net_increments",
    "parse_record",
    "parse_records",
    "parse_state",
    "parse_versioned",
    "pending_review",
    "stats_from_counters",
    "unlabelled_copy",
]

Number = int | float
"""A field value. Integer deltas are summed as exact 64-bit integers (the calibration
accumulator's fixed-point fields rely on it); float deltas as floats. A field that ever
received a float delta holds a float from then on."""

Increments = dict[str, dict[str, Number]]
"""accumulator key -> field -> delta."""

IncrementsFn = Callable[[VerdictRecord, LabelKind], Mapping[str, Mapping[str, Number]]]
"""A pure function: the increments one label of one record adds (storage negates it to remove)."""

INT64_MAX = 2**63 - 1

VersionedKind = Literal["threshold", "model", "monitor_event"]
"""What a versioned record is: each kind is numbered 1, 2, ... per (tenant, panel)."""

V = TypeVar("V", ThresholdRecord, ModelRecord, MonitorEvent)

_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")

STRATA: tuple[Stratum, ...] = ("review", "audit", "none", "inline")
"""Every stratum, in the order ``review_stats`` reports them."""


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


def check_verdict_record(tenant: str, record: VerdictRecord) -> None:
    """``save_verdict``'s preconditions, shared by the backends."""
    check_tenant(tenant)
    if record.tenant != tenant:
        raise ValueError(f"record.tenant {record.tenant!r} does not match tenant {tenant!r}")
    if record.label is not None or record.labelled_at is not None:
        raise ValueError("save_verdict stores unlabelled records: use set_label for the label")


def check_label(label: str, comment: str | None) -> None:
    """``set_label``'s label kind and optional comment (at most ``COMMENT_MAX_CHARS``)."""
    if label not in LABEL_KINDS:
        raise ValueError(f"label must be {spelled(LABEL_KINDS, quote=True)}, got {label!r}")
    if comment is not None and (not isinstance(comment, str) or len(comment) > COMMENT_MAX_CHARS):
        raise ValueError(f"comment must be a string of at most {COMMENT_MAX_CHARS} characters")


def check_versioned(panel: str, record: ThresholdRecord | ModelRecord | MonitorEvent) -> None:
    """``put_threshold`` / ``put_model`` / ``put_monitor_event`` preconditions."""
    check_name("panel", panel)
    if record.panel != panel:
        raise ValueError(f"record.panel {record.panel!r} does not match panel {panel!r}")


def check_serving_put(panel: str, expected: tuple[int, int], *records: Any) -> None:
    """``put_serving`` preconditions: versions that exist (integers >= 0) and at least one
    record, each of ``panel``."""
    if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0 for v in expected):
        raise ValueError(f"expected versions must be integers >= 0, got {tuple(expected)!r}")
    if all(record is None for record in records):
        raise ValueError("put_serving needs a threshold, a model or both")
    for record in records:
        if record is not None:
            check_versioned(panel, record)


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


def clock(now: float | None) -> float:
    """``now`` as float epoch seconds, the wall clock when ``None``."""
    if now is None:
        return time.time()
    value = float(now)
    if not math.isfinite(value):
        raise ValueError(f"now must be finite epoch seconds, got {now!r}")
    return value


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
    record: VerdictRecord, new_label: LabelKind | None, increments: IncrementsFn
) -> Increments:
    """What setting ``new_label`` on ``record`` writes: new increments minus the old label's.

    Every field either side names is present in the result (a field may net to 0), so both
    backends create the same fields; int deltas stay ints. Called inside the atomic section.
    """
    net = _checked(increments(record, new_label), 1) if new_label is not None else {}
    if record.label is not None:
        for key, fields in _checked(increments(record, record.label), -1).items():
            row = net.setdefault(key, {})
            for field, delta in fields.items():
                row[field] = row[field] + delta if field in row else delta
    return net


def labelled_copy(
    record: VerdictRecord, label: LabelKind, labelled_at: float, comment: str | None = None
) -> VerdictRecord:
    """The record with its new label and comment (``decided_at`` set by its first A/B label)."""
    decided_at = record.decided_at
    if decided_at is None and label in DECIDED:
        decided_at = labelled_at
    return record.model_copy(update={"label": label, "labelled_at": labelled_at,
                                     "label_comment": comment, "decided_at": decided_at})


def label_unchanged(record: VerdictRecord, label: LabelKind, comment: str | None) -> bool:
    """Whether ``set_label`` has nothing to write: the same label, and no new comment."""
    return record.label == label and (comment is None or comment == record.label_comment)


def label_status(record: VerdictRecord, label: LabelKind) -> Literal["labelled", "relabelled", "unchanged"]:
    """What setting ``label`` on ``record`` (as read) is: a first label, a relabel, or the same
    label (maybe with a new comment)."""
    if record.label is None:
        return "labelled"
    return "unchanged" if record.label == label else "relabelled"


def unlabelled_copy(record: VerdictRecord) -> VerdictRecord:
    """The record as it was before any label (``decided_at`` kept: see the record's doc)."""
    return record.model_copy(update={"label": None, "labelled_at": None, "label_comment": None})


def hour_of(epoch_seconds: float) -> int:
    """The hour bucket of a time: whole hours since the epoch (UTC)."""
    return int(epoch_seconds // 3600)


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


def pending_review(record: VerdictRecord) -> bool:
    """Whether ``record`` waits for review: queued at decision time and not labelled yet (a
    first label is what takes an item out of the queue, so the two always agree)."""
    return record.label is None and record.review is not None and record.review.queued


# -- what comes back: stored data parsed, StorageCorrupt when it does not -------------------------
def parse_record(raw: str | bytes, backend: str) -> VerdictRecord:
    """A stored verdict record; :class:`StorageCorrupt` (naming ``backend``) when invalid."""
    try:
        return VerdictRecord.model_validate_json(raw)
    except ValidationError as exc:
        raise StorageCorrupt(
            f"{backend}: stored verdict record is invalid ({exc.error_count()} errors)"
        ) from exc


PARSE_OFF_LOOP_BYTES = 64 * 1024
"""Stored records past this many bytes together are parsed in a worker thread: validating 2,000
labelled records of 13 judges with 16 signals each took 1.5 s on the event loop (a refit's
read), a stall every request waited out; in a thread the loop takes the GIL back every switch
interval (docs/design.md, 'Scale')."""


async def parse_records(raws: Sequence[str | bytes | None], backend: str) -> list[VerdictRecord]:
    """:func:`parse_record` of each of ``raws`` (None skipped: a record gone meanwhile), off
    the event loop when they are large together (:data:`PARSE_OFF_LOOP_BYTES`)."""
    present = [raw for raw in raws if raw is not None]
    if sum(len(raw) for raw in present) < PARSE_OFF_LOOP_BYTES:
        return [parse_record(raw, backend) for raw in present]
    return await asyncio.to_thread(lambda: [parse_record(raw, backend) for raw in present])


def parse_versioned(cls: type[V], version: int, raw: str | bytes, backend: str) -> V:
    """The stored ``raw`` as a ``cls`` numbered ``version``; :class:`StorageCorrupt` when it does
    not parse (the version lives beside the body, in the key or the row, not in it)."""
    try:
        data: Any = json.loads(raw)
        data["version"] = version
        return cls.model_validate(data)
    except (ValueError, TypeError) as exc:  # ValidationError is a ValueError
        raise StorageCorrupt(f"{backend}: stored {cls.__name__} is invalid") from exc


def parse_state(version: Any, body: str | bytes, key: str, backend: str) -> StateBlob:
    """A stored state blob; :class:`StorageCorrupt` when its version or body is invalid."""
    try:
        return StateBlob(version=int(version), body=json.loads(body))
    except (ValueError, TypeError) as exc:
        raise StorageCorrupt(f"{backend}: stored state {key!r} is invalid") from exc
