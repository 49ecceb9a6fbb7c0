"""Records the service stores: verdicts (with their later label), thresholds, fusion models.

They are pydantic models so a malformed stored record is refused with the field that was
wrong (the storage backends turn that into :class:`~judgefuse.service.storage.base.StorageCorrupt`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from judgefuse.fusion.verdict import Verdict
from judgefuse.judges.types import Letter, PairwiseItem

LabelStatus = Literal["labelled", "relabelled", "unchanged"]


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
    label: Letter | None = None
    labelled_at: float | None = None

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
    label: Letter
    previous: Letter | None = None
    record: VerdictRecord
    applied: dict[str, dict[str, int | float]] = Field(default_factory=dict)


class ThresholdRecord(BaseModel):
    """An auto-accept threshold for one (tenant, panel), as tuned (DESIGN.md "Routing").

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
    """The auto-accept threshold promoted together with this model (DESIGN.md "Learning keeps
    routing"): tuned for it on the same labels from cross-fitted confidences, stored first as
    its own threshold version and embedded here, so the pair is one record and a replica that
    reads the model has its threshold too. None: no target precision was ever set for the
    panel (nothing to keep routing), or a record from before pairing."""
