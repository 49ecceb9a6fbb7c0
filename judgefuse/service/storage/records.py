"""Records the service stores: verdicts (with their later label), thresholds, fusion models.

They are pydantic models so a malformed stored record is refused with the field that was
wrong (the storage backends turn that into :class:`~judgefuse.service.storage.base.StorageCorrupt`).
"""

from __future__ import annotations

import math
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import LETTERS, LabelKind, PairwiseItem

LabelStatus = Literal["labelled", "relabelled", "unchanged"]
DECIDED: tuple[LabelKind, ...] = LETTERS
"""The label kinds that say which answer is better (accuracy, calibration, tuning, refits):
:data:`judgefuse.judges.types.LETTERS`, under the name storage backends use (the label kinds
themselves are :data:`judgefuse.judges.types.LabelKind`)."""
COMMENT_MAX_CHARS = 2000
"""The longest comment stored with a label."""
Stratum = Literal["review", "audit", "none", "inline"]
"""A verdict's review stratum (docs/design.md, 'The review loop'), fixed when the verdict is decided:
``review`` (routed to human review, inclusion probability 1), ``audit`` (auto-accepted and drawn
for audit with probability ``audit_rate``), ``none`` (auto-accepted, not drawn: never queued, so
a later label for it is "unsolicited" and stays out of the population estimates), ``inline``
(the request carried its label: labelled at decision time whatever the route, so these verdicts
are a census of their own stratum, never queued)."""


BAND_AUDIT = "audit_band"
"""The reason of an active audit drawn above its band's floor (``audit_sampling: active``,
:mod:`judgefuse.service.review.active_audits`): a label of it counts in its band's stratum like
any audit's, but it is no uniform sample of the auto-accepted verdicts, so the precision monitor
and the tuner's pooling leave it out."""


class ReviewStamp(BaseModel):
    """How a verdict entered the review queue (or did not), stamped at decision time and never
    rewritten: a later change of the panel's ``audit_rate`` does not touch stored stamps, so
    every label's inclusion probability is the one that was in force when it was sampled.

    ``rank`` is a uniform draw that orders the queue: annotators lease the lowest ranks first,
    so the queue is served in random order and the labelled part of each stratum is a random
    sample of it (the population estimators rely on that; "hardest first" would bias them).
    """

    model_config = ConfigDict(extra="forbid")

    stratum: Stratum
    inclusion_probability: float = Field(ge=0.0, le=1.0)
    """1 for ``review``; the audit rate in force for ``audit``; 0 for ``none``."""
    reason: str = Field(min_length=1, max_length=64)
    """Why it was queued: ``below_threshold``, ``no_threshold``, ``degraded``, ``undecided``,
    ``audit``, :data:`BAND_AUDIT`, ``review_everything``, ``method_mismatch`` ...;
    ``auto_accept`` for ``none``."""
    audit_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    """The panel's audit rate in force at decision time (also for ``review`` and ``none``)."""
    draw: float | None = Field(default=None, ge=0.0, lt=1.0)
    """The uniform draw compared with ``audit_rate`` (auto-accepted verdicts only)."""
    rank: float = Field(default=0.0, ge=0.0, lt=1.0)
    """Queue order key, uniform in [0, 1), drawn at decision time."""
    route: Literal["auto_accept", "human_review"] | None = None
    """The route at decision time (None in stamps from before it was recorded)."""

    @property
    def queued(self) -> bool:
        """Whether the verdict entered the review queue (``review`` and ``audit``)."""
        return self.stratum in ("review", "audit")


class VerdictRecord(BaseModel):
    """One verdict as stored: who asked, which panel, when, the fused verdict, the item, the label.

    ``item`` is optional: a tenant may choose not to store question and answers. ``label`` and
    ``labelled_at`` are set only through ``Storage.set_label`` (never by ``save_verdict``).
    """

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1, max_length=256)
    tenant: str = Field(min_length=1)
    panel: str = Field(min_length=1, max_length=256)
    created_at: float
    """Epoch seconds. Also decides the record's hour bucket and its place in ``iter_labelled``."""
    verdict: Verdict
    item: PairwiseItem | None = None
    label: LabelKind | None = None
    labelled_at: float | None = None
    label_comment: str | None = Field(default=None, max_length=COMMENT_MAX_CHARS)
    """The annotator's optional comment, stored with the label (a relabel or undo replaces it)."""
    decided_at: float | None = None
    """When the verdict first got an ``A`` or ``B`` label; kept through relabels and undos, so
    the precision monitor is fed one label per verdict, the first decided one."""
    review: ReviewStamp | None = None
    """The review stratum stamped at decision time (``None``: a record from before the review
    loop; readers treat a ``human_review`` route as ``review`` and anything else as ``none``)."""
    threshold_version: int | None = None
    """The version of the threshold record that routed this verdict (None: no threshold)."""

    @field_validator("created_at")
    @classmethod
    def _finite_time(cls, value: float) -> float:
        if not math.isfinite(value) or value < 0:
            raise ValueError("created_at must be finite epoch seconds")
        return value


class LabelOutcome(BaseModel):
    """What ``Storage.set_label`` did.

    ``status``: ``labelled`` (first label), ``relabelled`` (an old label was replaced: its
    increments were subtracted) or ``unchanged`` (the same label again: nothing was written).
    ``applied`` is the net increment written per accumulator key (empty when unchanged).
    """

    model_config = ConfigDict(extra="forbid")

    status: LabelStatus
    label: LabelKind
    previous: LabelKind | None = None
    record: VerdictRecord
    applied: dict[str, dict[str, int | float]] = Field(default_factory=dict)


class ThresholdRecord(BaseModel):
    """An auto-accept threshold for one (tenant, panel), as tuned (docs/design.md, 'Routing and threshold tuning').

    ``version`` is assigned by storage (1, 2, ...); leave it ``None`` when putting.
    """

    model_config = ConfigDict(extra="forbid")

    panel: str = Field(min_length=1, max_length=256)
    threshold: float = Field(ge=0.0, le=1.0)
    version: int | None = None
    created_at: float
    method: str = ""
    """The fusion method whose confidence the threshold applies to."""
    target_precision: float | None = Field(default=None, ge=0.0, le=1.0)
    delta: float | None = Field(default=None, ge=0.0, le=1.0)
    coverage: float | None = Field(default=None, ge=0.0, le=1.0)
    n_labels: int | None = Field(default=None, ge=0)
    details: dict[str, Any] = Field(default_factory=dict)


class ModelRecord(BaseModel):
    """A learned fusion model's parameters for one (tenant, panel): an opaque JSON blob.

    ``version`` is assigned by storage (1, 2, ...); leave it ``None`` when putting.
    """

    model_config = ConfigDict(extra="forbid")

    panel: str = Field(min_length=1, max_length=256)
    version: int | None = None
    created_at: float
    method: str = ""
    params: dict[str, Any] = Field(default_factory=dict)
    """The fusion's parameters, whatever JSON its owner writes (storage never reads it)."""
    metrics: dict[str, float] = Field(default_factory=dict)
    """Held-out metrics that justified promoting it (optional)."""
    threshold: ThresholdRecord | None = None
    """The auto-accept threshold promoted together with this model (docs/design.md, 'Learning keeps
    routing'): tuned for it on the same labels from cross-fitted confidences, stored first as
    its own threshold version and embedded here, so the pair is one record and a replica that
    reads the model has its threshold too. None: no target precision was ever set for the
    panel (nothing to keep routing), or a record from before pairing."""


class ServingVersions(NamedTuple):
    """The latest threshold and model versions of one (tenant, panel), 0 where none is stored:
    what a compare-and-set of the serving pair expects (``put_serving``), and what it wrote."""

    threshold: int
    model: int


class ReviewLease(BaseModel):
    """One queued verdict leased to one annotator until ``lease_expires_at`` (epoch seconds)."""

    model_config = ConfigDict(extra="forbid")

    record: VerdictRecord
    annotator: str = Field(min_length=1, max_length=256)
    lease_expires_at: float


class StratumCounts(BaseModel):
    """Review-queue counts of one stratum of one (tenant, panel), all time.

    ``routed``: verdicts stamped with the stratum; ``queued``: waiting in the queue (unlabelled,
    no live lease); ``leased``: under a live lease; ``labelled``: carrying a label (for
    ``none`` these are the unsolicited labels).
    """

    model_config = ConfigDict(extra="forbid")

    routed: int = Field(default=0, ge=0)
    queued: int = Field(default=0, ge=0)
    leased: int = Field(default=0, ge=0)
    labelled: int = Field(default=0, ge=0)


class StateBlob(BaseModel):
    """A small JSON document under a key, versioned for compare-and-set
    (``Storage.get_state`` / ``Storage.put_state``): the sequential monitors' state."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)
    body: dict[str, Any]


MonitorEventKind = Literal["alarm", "clear"]


class MonitorEvent(BaseModel):
    """A versioned event of a panel's precision monitor (docs/design.md, 'The review loop'): an alarm
    with its evidence and the action taken, or an operator's clear.

    ``version`` is assigned by storage (1, 2, ... per (tenant, panel)); leave it ``None``.
    """

    model_config = ConfigDict(extra="forbid")

    panel: str = Field(min_length=1, max_length=256)
    version: int | None = None
    created_at: float
    kind: MonitorEventKind
    threshold_version: int = Field(ge=1)
    action: str = Field(min_length=1, max_length=64)
    """``review_everything``, ``raise_threshold`` or ``alert_only`` (an alarm); ``cleared``."""
    reason: str = ""
    evidence: dict[str, Any] = Field(default_factory=dict)
    """The monitor's report when it fired: labels, correct, estimate, lower, upper, target,
    alpha, window_start, window_labels, alarmed_at."""
