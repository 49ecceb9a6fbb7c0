"""Request and response bodies of the HTTP API (pydantic; no FastAPI import, the gateway uses them).
Plain models: the client reads them without the engine; building a verdict's body from the
engine's objects is :mod:`judgefuse.service.kernel.verdict_out`.

Length limits that depend on settings (question/answer length, batch size) are checked by the
gateway against :class:`~judgefuse.service.settings.Settings` and reported as 422 / 413 naming
the field; the static limits here are hard ceilings.

Cost (docs/design.md, 'Cost accounting'): every vote carries its own ``calls``, ``prompt_tokens``,
``completion_tokens`` and ``cost_usd``; a verdict's ``cost`` is their sum over the votes it drew
(for a cascade: only the judges consulted), and a batch's ``cost`` the sum over its verdicts.
Money comes from litellm's price table (:mod:`judgefuse.judges.transport.pricing`); a model not
in it (a local server, a stub) costs 0 USD but its calls and tokens still count. The fuser
model's own call (fusion ``fuser``) is not included: the fuser does not report its usage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic.json_schema import SkipJsonSchema

from judgefuse.judges.types import Letter
from judgefuse.service.storage.label_history import LabelEvent
from judgefuse.service.storage.records import COMMENT_MAX_CHARS, LabelKind

Route = Literal["auto_accept", "human_review"]


class JudgeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    question: str
    answer_a: str
    answer_b: str
    id: str | None = Field(default=None, min_length=1, max_length=256, pattern=r"^[^\s/]+$")
    label: Letter | None = None
    """Ground truth known at request time: stored as feedback right away."""
    category: str | None = Field(default=None, max_length=256)
    panel: str | None = Field(default=None, min_length=1, max_length=256)
    method: str | None = Field(default=None, min_length=1, max_length=256)
    """A fusion method name; default: the panel's active method (learned once promoted)."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class InvalidItem(BaseModel):
    """A batch item that failed validation: answered as its own 422 in ``results``, never the
    whole batch's (pydantic's error dicts, input removed)."""

    errors: list[dict[str, Any]]


def _keep_invalid_item(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    try:
        return handler(value)
    except ValidationError as exc:
        return InvalidItem(errors=[
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type")}
            for e in exc.errors(include_url=False, include_input=False, include_context=False)
        ])


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    items: list[Annotated[JudgeRequest, WrapValidator(_keep_invalid_item)]] = Field(min_length=1)
    """Documented as JudgeRequest; an item that is not one arrives as :class:`InvalidItem`."""


StrictNumber = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A JSON number, never a string (``"0.9"``) or a boolean (``true``): a posted confidence,
``p_a`` or signal is a measurement, and a coerced one hides the client's bug."""


class FuseVote(BaseModel):
    """One vote computed elsewhere (``POST /v1/fuse``), by a judge the panel declares.

    ``choice`` null is an abstention (``confidence`` must be null too); a vote that omits
    ``choice`` but gives ``p_a`` has its choice and confidence derived from ``p_a`` (exactly 0.5
    is a tie vote: the judge saw no difference, counted at ``p_a`` 0.5, docs/design.md 'Fusion').
    ``mode`` defaults to the judge's mode in the panel file.
    """

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    judge: str = Field(min_length=1, max_length=256)
    choice: Letter | None = None
    confidence: StrictNumber | None = Field(default=None, ge=0.0, le=1.0)
    p_a: StrictNumber | None = Field(default=None, ge=0.0, le=1.0)
    """P(A is better): it must agree with ``choice`` and ``confidence`` when given with them
    (:mod:`judgefuse.service.judging.posted_votes`)."""
    mode: Literal["sc", "mp", "logprob", "recorded"] | None = None
    signals: dict[str, StrictNumber] = Field(default_factory=dict, max_length=64)
    explanation: str = Field(default="", max_length=10_000)


class FuseRequest(JudgeRequest):
    """``POST /v1/fuse``: a pair and the votes already cast on it (one per judge at most)."""

    votes: list[FuseVote] = Field(min_length=1, max_length=256)


class FuseBatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    items: list[Annotated[FuseRequest, WrapValidator(_keep_invalid_item)]] = Field(min_length=1)
    """Documented as FuseRequest; an item that is not one arrives as :class:`InvalidItem`."""


class ReviewOut(BaseModel):
    """How the verdict entered the review queue (or not), fixed when it was decided."""

    queued: bool
    reason: str
    """``below_threshold``, ``no_threshold``, ``review_everything``, ``method_mismatch``,
    ``model_mismatch``, ``undecided``, ``cascade`` (routed to review), ``audit`` (auto-accepted
    and drawn for audit), ``audit_band`` (drawn for audit above the floor of active audits,
    ``audit_sampling: active``) or ``auto_accept`` (not queued)."""
    stratum: Literal["review", "audit", "none", "inline"]
    inclusion_probability: float
    audit_rate: float
    threshold_version: int | None = None


class VoteOut(BaseModel):
    """One judge's vote as returned: no raw provider text, no request details."""

    judge: str
    mode: str
    choice: Letter | None
    confidence: float | None
    p_a: float | None
    tie: bool = Field(default=False, description=(
        "The judge said the answers are equally good: a judgment (choice and error null, p_a "
        "0.5), not a failure. A vote with choice null and tie false failed (see error)."))
    explanation: str = ""
    error: str | None = None
    latency_s: float = 0.0
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    notes: list[str] = Field(default_factory=list)


class CostOut(BaseModel):
    """What a verdict (or a batch) cost: model calls, tokens and money (USD)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usd: float = 0.0

    @classmethod
    def total(cls, costs: Iterable[CostOut]) -> CostOut:
        costs = list(costs)
        return cls.model_construct(
            calls=sum(c.calls for c in costs),
            prompt_tokens=sum(c.prompt_tokens for c in costs),
            completion_tokens=sum(c.completion_tokens for c in costs),
            usd=math.fsum(c.usd for c in costs),
        )


class CascadeOut(BaseModel):
    """Where a cascade panel decided. ``stage`` is 1-based (None: no stage accepted, human
    review); the fallback panel, when configured, is the last stage (name ``"panel"``)."""

    stage: int | None
    name: str | None
    accepted: bool
    stages: int
    """Stages in the cascade, the fallback panel included."""
    stages_consulted: int
    fallback: Literal["review", "panel"]
    stage_threshold: float | None = None
    """The accepting stage's threshold (from the panel YAML)."""

class FailedJudge(BaseModel):
    judge: str
    reason: str


class ErrorField(BaseModel):
    """One request field at fault: ``body.answer_a``, ``query.panel``, ``header.authorization``,
    ``body.items[2].id``, ``body`` (the body as a whole)."""

    model_config = ConfigDict(extra="forbid")

    field: str
    problem: str


def _absent_not_null(schema: dict[str, Any]) -> None:
    """An optional key of an error body is left out, never sent as ``null``: its schema says
    only its type (no ``"default": null``)."""
    for prop in schema.get("properties", {}).values():
        if "default" in prop and prop["default"] is None:
            del prop["default"]


class ErrorBody(BaseModel):
    """Every error answer's body (built by ``errors.error_body``). Optional keys are left out
    when they do not apply (never ``null``); the input at fault is never echoed. No other key is
    ever sent: a key the server starts sending must be added here (the schemathesis suite checks
    error answers against this model)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True,
                              json_schema_extra=_absent_not_null)

    error: str
    """What was wrong, in words."""
    fields: list[ErrorField] | SkipJsonSchema[None] = None
    """The request fields at fault, when a field is (always on 401, 413 and 422)."""
    limit: Literal["max_inflight_per_tenant", "max_inflight_total", "max_inflight_labels",
                   "max_inflight_work", "shed_loop_lag_s",
                   "shed_sojourn_s", "shed_wait_s"] | SkipJsonSchema[None] = None
    """429: the limit that is full (the setting's name; ``max_inflight_work``: that many
    judging requests are being worked on in the gateway; ``shed_loop_lag_s``: the event loop is
    past capacity, ``shed_sojourn_s``: verdicts are queueing in the gateway, ``shed_wait_s``:
    the request waited too long for the event loop before admission; no in-flight count applies
    to the last three)."""
    max_inflight: int | SkipJsonSchema[None] = None
    """429: that limit's value."""
    retry_after_s: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    """429: seconds to wait before retrying (also sent as the ``Retry-After`` header)."""
    panel: str | SkipJsonSchema[None] = None
    """503 quorum lost: the panel."""
    quorum: int | SkipJsonSchema[None] = None
    """503 quorum lost: the valid votes the panel needs."""
    valid_votes: int | SkipJsonSchema[None] = None
    """503 quorum lost: the valid votes it got."""
    failed_judges: list[FailedJudge] | SkipJsonSchema[None] = None
    """503 quorum lost: each judge without a valid vote and why."""


class ThresholdUsed(BaseModel):
    value: float | None
    version: int | None
    method: str | None = None
    reason: str
    code: str | None = None
    """The routing reason as a word (``ReviewOut.reason``): ``no_threshold``,
    ``below_threshold``, ``above_threshold``, ``undecided``, ... (None on stored verdicts)."""


class LabelResult(BaseModel):
    verdict_id: str
    status: Literal["labelled", "relabelled", "unchanged"]
    label: LabelKind
    """``A`` / ``B``, or ``tie`` / ``both_bad`` (counted apart, outside accuracy and calibration)."""
    previous: LabelKind | None = None
    comment: str | None = None
    labelled_at: float | None = None
    """When the label now stored was set (epoch seconds)."""
    keys_updated: list[str] = Field(default_factory=list)


class VerdictOut(BaseModel):
    id: str
    panel: str
    choice: Letter | None
    confidence: float
    p_a: float
    route: Route
    threshold: ThresholdUsed
    method: str
    model_version: str | None
    degraded: bool
    failed_judges: list[FailedJudge]
    votes: list[VoteOut]
    n_valid: int
    n_invalid: int
    tie_broken: bool = False
    notes: list[str] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    created_at: float
    label: LabelKind | None = None
    labelled_at: float | None = None
    feedback: LabelResult | None = None
    category: str | None = None
    cost: CostOut = Field(default_factory=CostOut)
    """Sum over ``votes`` (the judges this verdict consulted)."""
    cascade: CascadeOut | None = None
    """Set for a cascade panel's verdicts: which stage decided."""
    review: ReviewOut | None = None
    """The review stratum stamped at decision time (None: a verdict from before the loop)."""
    label_history: list[LabelEvent] | None = None
    """``GET /v1/verdicts/{id}`` only (None elsewhere): every label, relabel, comment change
    and undo of the verdict, oldest first, the newest 50 kept (``seq`` numbers them from 1, so
    a first ``seq`` above 1 says older ones were dropped); ``by`` names who, never a key."""


class BatchResult(BaseModel):
    index: int
    status: int
    verdict: VerdictOut | None = None
    error: dict[str, Any] | None = None


class BatchResponse(BaseModel):
    results: list[BatchResult]
    n_ok: int
    n_failed: int
    cost: CostOut = Field(default_factory=CostOut)
    """Sum over the verdicts returned (failed items' judge calls are in /metrics only)."""


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    verdict_id: str = Field(min_length=1, max_length=256)
    label: LabelKind
    """``A`` or ``B`` (the better answer), ``tie`` or ``both_bad``: the last two are stored and
    counted as such, never in accuracy, calibration, tuning or refits."""
    comment: str | None = Field(default=None, max_length=COMMENT_MAX_CHARS)
    """An optional note stored with the label."""


class TuneRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    panel: str | None = Field(default=None, min_length=1, max_length=256)
    target_precision: float = Field(gt=0.0, lt=1.0)
    delta: float = Field(default=0.1, ge=1e-9, le=0.5)
    """Allowed failure probability of the guarantee; below 1e-9 the exact binomial quantile is
    numerically meaningless, above 0.5 the "guarantee" is a coin flip."""
    min_count: int = Field(default=30, ge=1, le=1_000_000)
    method: str | None = Field(default=None, min_length=1, max_length=256)
    """Tune for this method's confidence (default: the panel's active method)."""


class RefitRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    panel: str | None = Field(default=None, min_length=1, max_length=256)
    method: str | None = Field(default=None, min_length=1, max_length=256)
    """The refittable method to fit from labels (default: ``settings.learning.refit_method``)."""
    cold_start: bool = False
    """Fit the panel's label-free cold-start method (``fusion: dawid_skene``) on its stored,
    unlabelled votes now, instead of a refit from labels."""


class ReviewSkipRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    verdict_id: str = Field(min_length=1, max_length=256)
    annotator: str | None = Field(default=None, min_length=1, max_length=256)
    """Default: the ``X-Annotator`` header, else the tenant's name."""


class ReviewItemOut(BaseModel):
    """One leased item as an annotator sees it: the pair, never the judges' verdict unless
    the panel opts in (``review_shows_verdict``), so the label is not anchored on it."""

    verdict_id: str
    question: str
    answer_a: str
    answer_b: str
    reason: str
    stratum: str
    lease_expires_at: float
    verdict: dict[str, Any] | None = None


class MonitorClearRequest(BaseModel):
    """``POST /v1/monitor/clear``: an operator ends the alarm of the panel's current threshold
    version (its monitor restarts from zero labels)."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    panel: str | None = Field(default=None, min_length=1, max_length=256)


class MonitorPrecision(BaseModel):
    """The auto-accept precision of the current threshold version from its audit labels:
    ``upper < target`` is the alarm. ``estimate`` is None before any label."""

    estimate: float | None
    lower: float
    upper: float
    labels: int


class MonitorEventOut(BaseModel):
    version: int | None
    created_at: float
    kind: Literal["alarm", "clear"]
    threshold_version: int
    action: str
    reason: str
    evidence: dict[str, Any]


class MonitorClearOut(BaseModel):
    """What ``POST /v1/monitor/clear`` did: ``cleared`` false when there was no alarm (nothing
    written); else the ``clear`` event stored with the evidence."""

    panel: str
    threshold_version: int | None
    cleared: bool
    event: MonitorEventOut | None = None


class JudgeDriftOut(BaseModel):
    """Per judge: ``brier`` (its Brier score on audit labels against its reference period,
    shared by replicas) and ``votes`` (label-free: its share of "A" and mean confidence, per
    replica); each has its own ``alarm``. Reported only: no routing action hangs on them."""

    brier: dict[str, Any] | None = None
    votes: dict[str, Any] | None = None


class MonitorOut(BaseModel):
    """``GET /v1/monitor``: the precision monitor of the panel's current threshold version."""

    panel: str
    state: Literal["ok", "alarm"]
    precision: MonitorPrecision
    target: float | None
    threshold_version: int | None
    on_drift: str
    alpha: float
    method: str = "restarted beta-mixture confidence sequence (anytime-valid)"
    window: dict[str, int]
    restarts: int
    """Operator clears of this threshold version (each restarts the monitor)."""
    series: list[list[float | None]]
    """The bound over time: ``[time, labels, estimate, lower, upper]`` per label (the last 240)."""
    judges: dict[str, JudgeDriftOut]
    events: list[MonitorEventOut]
