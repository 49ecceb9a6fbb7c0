"""Typed response bodies of the JSON endpoints that used to return ``dict[str, Any]``.

With a response model FastAPI's OpenAPI document (``/openapi.json``, the docs page) describes
each endpoint's body, and a field a handler forgets is an error instead of a silently smaller
answer. Blocks whose keys are data rather than schema (metrics by name, a tuning report,
per-stratum counts) stay mappings; every model allows extra keys so a room that adds a field
(a new metric, a monitor block) does not have it dropped on the way out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from judgefuse.service.schemas import ReviewItemOut
from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = [
    "CalibrationKeyOut",
    "CalibrationOut",
    "HealthOut",
    "ModelsOut",
    "RefitOut",
    "ReviewNextOut",
    "ReviewSkipOut",
    "ReviewStatsOut",
    "StratumStatsOut",
    "ThresholdOut",
    "ThresholdsOut",
    "TuneOut",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class HealthOut(_Open):
    status: str


class CalibrationKeyOut(_Open):
    """One calibration key (``method:<name>:fused``, ``judge:<name>:<mode>``, ``mode:all:<mode>``)."""

    key: str
    storage_key: str | None
    panel: str
    kind: str
    name: str
    mode: str | None
    sample: str
    all_time: dict[str, Any] | None
    """Metrics of every label so far (None: the judge only ever abstained)."""
    window: dict[str, Any] | None
    """The same over the window (None: no window asked for)."""
    abstained: dict[str, int] | None
    population: dict[str, Any] | None
    """Estimates for all traffic, per review stratum (None: not asked for, or a mode key)."""


class CalibrationOut(_Open):
    panel: str
    window_hours: int | None
    eps: float
    n_bins: int
    keys: list[CalibrationKeyOut]


class RefitOut(_Open):
    status: str
    """``promoted``, ``kept`` or ``skipped``."""
    reason: str
    panel: str
    n_labels: int
    active_method: str
    model_version: str | None = None
    version: int | None = None
    metrics: dict[str, float] | None = None
    threshold: float | None = None
    threshold_version: int | None = None


class ModelsOut(_Open):
    panel: str
    active_method: str
    model_version: str | None
    history: list[ModelRecord]


class ThresholdOut(ThresholdRecord):
    review_everything: bool
    """The record routes every verdict to review (the data contradicted every threshold)."""


class ThresholdsOut(_Open):
    panel: str
    active_method: str
    model_version: str | None
    current: ThresholdOut | None
    history: list[ThresholdOut]


class TuneOut(_Open):
    panel: str
    method: str
    model_version: str | None
    n_labels: int
    n_unsolicited: int
    data: str
    """What the evidence was, in words."""
    population: dict[str, int]
    """Verdicts per review stratum the labels stand for."""
    stored: bool
    threshold: float | None
    version: int | None
    reason: str
    report: dict[str, Any] | None
    review_everything: bool | None = None


class ReviewNextOut(_Open):
    panel: str
    annotator: str
    items: list[ReviewItemOut]


class ReviewSkipOut(_Open):
    verdict_id: str
    annotator: str
    released: bool


class StratumStatsOut(_Open):
    routed: int
    queued: int
    leased: int
    labelled: int
    labelled_share: float | None


class ReviewStatsOut(_Open):
    panel: str
    audit_rate: float
    strata: dict[str, StratumStatsOut]
    queue_depth: int
    leased: int
