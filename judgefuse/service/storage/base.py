"""The storage interface the service uses: :class:`Storage`, the union of the contracts by concern.

Three backends implement :class:`Storage` with the same behaviour (one test suite runs on all):
:class:`~judgefuse.service.storage.sqlite.SQLiteStorage` (the embedded default, one file),
:class:`~judgefuse.service.storage.redis.RedisStorage` (state shared between gateway replicas)
and :class:`~judgefuse.service.storage.postgres.PostgresStorage` (the system of record). A
caller that needs one concern only may depend on its contract in :mod:`.contracts`
(:class:`~.contracts.ReviewQueueStore`, :class:`~.contracts.LabelLedger`, ...). The typed
errors are in :mod:`.errors`, the argument checks and the helpers the backends share in
:mod:`.checks`.

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
See :mod:`.errors`: backend exceptions are mapped to :class:`StorageError` and its subclasses;
a bad argument is a ``ValueError`` (:mod:`.checks`). An exception raised by the caller's
``increments`` function propagates unchanged and nothing is written.
"""

from __future__ import annotations

from judgefuse.service.storage.contracts import (
    Coordination,
    LabelLedger,
    Lifecycle,
    RecordArchive,
    ReviewQueueStore,
    VerdictStore,
    VersionedRecords,
)

__all__ = [
    "Coordination",
    "LabelLedger",
    "Lifecycle",
    "RecordArchive",
    "ReviewQueueStore",
    "Storage",
    "VerdictStore",
    "VersionedRecords",
]


class Storage(
    Lifecycle, VerdictStore, LabelLedger, ReviewQueueStore, VersionedRecords, Coordination,
    RecordArchive,
):
    """Async storage for verdicts, labels, calibration accumulators, the review queue,
    thresholds, models, monitor events, leases, claims and state blobs: every contract of
    :mod:`.contracts` in one (each backend implements the hooks of all of them).

    Use ``await storage.open()`` / ``await storage.close()`` or ``async with storage:``.
    """
