"""Typed response bodies of the JSON endpoints.

With a response model FastAPI's OpenAPI document (``/openapi.json``, the docs page) describes
each endpoint's body, and a field a handler forgets is an error instead of a silently smaller
answer. Blocks whose keys are data rather than schema (metrics by name, a tuning report,
per-stratum counts) stay mappings; every model allows extra keys so a room that adds a field
(a new metric, a monitor block) does not have it dropped on the way out.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from judgefuse.service.schemas import ReviewItemOut
from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = [
    "AgreementBlockOut",
    "AgreementOut",
    "CalibrationKeyOut",
    "CalibrationOut",
    "HealthOut",
    "JudgeEstimateOut",
    "ModelsOut",
    "PanelStructureOut",
    "PlanOut",
    "ReadyOut",
    "RefitOut",
    "ReviewNextOut",
    "ReviewSkipOut",
    "ReviewStatsOut",
    "StratumStatsOut",
    "ThresholdOut",
    "ThresholdsOut",
    "TuneOut",
    "WidthPlanOut",
    "ConfusionOut",
]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class HealthOut(_Open):
    status: str


class ReadyOut(BaseModel):
    """``GET /readyz``: 200 when storage answers and every panel started, else 503 (same body)."""

    status: Literal["ready", "not ready"]
    storage: bool
    panels: dict[str, bool]
    """Panel name -> started (empty before the lifespan started them)."""


class ConfusionOut(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    labels: list[str]
    """The rows: what the label says (``A``, ``B``)."""
    answers: list[str]
    """The columns: what the judge or method answered (``A``, ``B``)."""
    counts: list[list[int]]
    """``counts[i][j]``: verdicts labelled ``labels[i]`` answered ``answers[j]``."""


class AgreementBlockOut(BaseModel):
    """One judge's or method's answers against the labels, over labelled verdicts (the review
    loop's review, audit, inline and unsolicited labels), not over all traffic."""

    model_config = ConfigDict(use_attribute_docstrings=True)

    n: int
    """Labelled verdicts it answered A or B (the confusion matrix's total)."""
    cohen_kappa: float | None
    """Cohen's kappa of its A/B answers against the A/B labels over labelled verdicts (review
    plus audit labels, not a uniform sample of the population); tie votes and missing answers
    are left out and counted beside it. None: undefined (no answer, or one letter throughout
    on both sides)."""
    confusion: ConfusionOut
    ties: dict[str, int]
    """Tie votes per label (``A``, ``B``)."""
    no_answer: dict[str, int]
    """Failed votes or undecided verdicts per label (``A``, ``B``)."""


class AgreementOut(BaseModel):
    model_config = ConfigDict(use_attribute_docstrings=True)

    all_time: AgreementBlockOut
    window: AgreementBlockOut | None
    """The same over the window (None: no window asked for)."""


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
    """Labelled verdicts without an answer of this judge or method (a failed vote, an undecided
    verdict), ``all_time`` and over the ``window`` (None: a mode key)."""
    population: dict[str, Any] | None
    """Estimates for all traffic, per review stratum (None: not asked for, or a mode key)."""
    ties: dict[str, int] | None = Field(default=None, description=(
        "Tie votes of this judge (fused ties, for a method) on A/B-labelled verdicts, all_time and "
        "over the window: judgments, not abstentions, in no calibration metric. Null: a mode key."))
    agreement: AgreementOut | None = Field(default=None, description=(
        "Agreement with the A/B labels over labelled verdicts (review + audit labels, not the "
        "population): Cohen's kappa, the 2x2 confusion matrix, ties and missing answers per "
        "label. Null: a mode key."))


class JudgeEstimateOut(_Open):
    """One judge: its accuracy estimated without labels next to its labelled accuracy."""

    judge: str
    n_votes: int
    """Verdicts in the sample with a valid vote of this judge."""
    estimated_accuracy: float | None
    """Dawid-Skene's estimate of P(vote = truth), from the unlabelled votes (labels unused)."""
    labelled_accuracy: float | None
    """Share of its hard observations on labelled verdicts that match the label (None: none)."""
    n_labelled_observations: int


class PanelStructureOut(_Open):
    """How many independent judges the panel is worth, and each judge's label-free accuracy
    (:mod:`judgefuse.fusion.panel_structure`)."""

    n_items: int
    """Verdicts in the sample (the newest ones, labelled or not, plus the newest labelled)."""
    n_labelled: int
    judges: list[JudgeEstimateOut]
    effective_judges_labelled: float | None
    """k / (1 + (k - 1) * rho), rho the mean pairwise correlation of errors against the labels
    (None: no pair of judges shares 10 labelled verdicts with varying errors)."""
    error_correlation_labelled: float | None
    effective_judges_unlabelled: float | None
    """The same with errors against the Dawid-Skene consensus (no labels needed)."""
    error_correlation_unlabelled: float | None
    definition: str


class DisagreementOut(_Open):
    id: str
    method: str
    choice: str
    """The fused answer, ``A`` or ``B``."""
    confidence: float
    label: str
    """The A/B label that contradicts it."""
    created_at: float


class DisagreementsOut(_Open):
    scanned: int
    """How many of the newest labelled verdicts were read (at most 500)."""
    items: list[DisagreementOut]
    """Labelled verdicts whose fused answer the label contradicts, most confident first."""


class CalibrationOut(_Open):
    panel: str
    window_hours: int | None
    eps: float
    n_bins: int
    keys: list[CalibrationKeyOut]
    panel_structure: PanelStructureOut | None = None
    """Per-judge label-free accuracy and the effective number of judges (None: not asked for,
    fewer than two judges, or no stored votes)."""
    label_kinds: dict[str, dict[str, int | None]] = {}
    """``tie`` and ``both_bad`` labels, ``all_time`` and over the ``window`` (None: no window):
    stored and counted, but in no key above (accuracy and calibration are over A/B labels)."""
    disagreements: DisagreementsOut | None = None
    """The most confident disagreements with the labels (None: ``disagreements=0``)."""


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


class RefitLogEntry(RefitOut):
    at: float
    """When it ran (epoch seconds)."""
    trigger: str
    """What started it: ``background`` (every ``refit_every_labels`` labels), ``api``
    (``POST /v1/fusion/refit``), ``tune``, ``console (<who>)``."""
    kind: str = "refit"
    """``refit`` (learned fusion from labels) or ``cold start`` (label-free)."""


class RefitsOut(_Open):
    panel: str
    active_method: str
    model_version: str | None
    refits: list[RefitLogEntry]
    """Newest first: each refit's outcome (``promoted``, ``kept``, ``skipped``, ``failed``)
    and why."""


class WidthPlanOut(_Open):
    """Audit rates and labels a day for the asked width (:class:`judgefuse.calibration.width_plan.WidthPlan`)."""

    traffic_days: float
    """Days from the first to the last verdict read: the volumes per day are over this span."""
    review_per_day: float
    auto_per_day: float
    precision: float
    """The auto-accepted verdicts' precision the plan assumes."""
    precision_basis: str
    """Where it comes from: the audit labels, or the mean fused confidence when there are none."""
    sd_uniform: float
    """The spread of an auto-accepted verdict's correctness under uniform audits."""
    sd_active: float
    """The Neyman spread over confidence bands (active audits)."""
    rates: dict[str, float]
    """Audit rate of the auto-accepted verdicts per ``estimate/design``: ``precision/uniform``,
    ``precision/active``, ``accuracy/uniform``, ``accuracy/active``."""
    labels_per_day: dict[str, float]
    """Audit labels a day for each of ``rates`` (rate times ``auto_per_day``)."""


class PlanOut(_Open):
    """``GET /v1/panels/{panel}/plan``: audit labels a day for a ``width``-wide 95% interval."""

    panel: str
    width: float
    window_days: float
    """The days of traffic the interval is to cover."""
    traffic_hours: int | None
    """The stored traffic read: the last this many hours (None: all of it)."""
    n_verdicts: int
    n_auto: int
    """Auto-accepted verdicts among ``n_verdicts``."""
    plan: WidthPlanOut | None
    """None when there is not enough traffic yet (``not_enough_traffic`` says what is missing)."""
    not_enough_traffic: str | None


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
    label_kinds: dict[str, int] = {}
    """``tie`` and ``both_bad`` labels so far (all time; each is also one ``labelled`` item of
    its stratum, but no A/B accuracy or calibration figure counts it)."""
