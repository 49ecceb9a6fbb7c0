"""Judge and panel configuration: the ``judges:`` entries of a panel YAML, validated up front.

A panel file::

    name: default
    fusion: mean_probability  # a fusion method name; checked against fusion's registry by the caller
    quorum: 1                 # minimum valid votes: a count (int >= 1) or a fraction of the judges
    deadline_s: 60            # the whole panel's budget per item (None: no panel deadline)
    judges:
      - name: gpt4o-mini
        model: openai/gpt-4o-mini          # a litellm model string
        api_key_env: OPENAI_API_KEY        # the NAME of an env var; the key never goes in YAML
        mode: sc                           # sc | mp | logprob
        circuit: {failure_threshold: 5, cooldown_s: 30}   # optional; on by default
      - name: local-logprob
        model: openai/smollm2
        mode: logprob
        local: {model: smollm2, threads: 2}   # served by a llama.cpp server the panel starts
      - name: my-reward-model
        external: true                     # no model: its votes are posted to POST /v1/fuse
    audit_rate: 0.05          # the service's review loop: share of auto-accepted verdicts audited
    review_shows_verdict: false   # annotators see the judges' verdict (off: avoids anchoring)

Backends (``backend``): ``direct`` is our aiohttp client for OpenAI-compatible endpoints (needs
``api_base`` or ``local``); ``litellm`` serves every other provider; ``auto`` (default) picks
``direct`` when there is an endpoint (``api_base`` or ``local``) and the model is ``openai/...``
or the entry says ``openai_compatible: true``, else ``litellm``. Any other name registered with
``@judge_backend`` (a plugin's, see :mod:`judgefuse.judges.registry`) is accepted as well; the
names come from :mod:`judgefuse.judges.backends`, the table below this module.

Model names are litellm's. The direct backend sends the model with one leading ``openai/``
removed, as litellm does (so ``openai/openai/gpt-oss-20b`` reaches vLLM as ``openai/gpt-oss-20b``
on both paths).

Defaults that depend on the mode are filled in on validation: ``temperature`` 0.7 for MP and 0
otherwise; ``use_n`` False for a local judge (llama.cpp refuses ``n`` > 1 with a plain 400).

:func:`load_panel_config` reads a YAML file; every error is a :class:`PanelConfigError` naming
the file and the field path (``judges[1].mode``).

A panel may also declare a cascade (cheapest stage first; thresholds from ``judgefuse tune
--cascade``; a stage without one never accepts)::

    cascade:
      - {judges: gpt-3.5-turbo, threshold: 0.93}
      - {judges: [mistral-7b-instruct], threshold: 0.97}
      - {judges: gpt-4-turbo}
    cascade_fallback: panel          # review (default) | panel (the full panel, fused with `fusion`)
    cascade_panel_threshold: 0.0     # fallback panel accepts at this confidence (0: always)
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from judgefuse.errors import InputError
from judgefuse.field_path import field_path
from judgefuse.judges.backends import available_backends
from judgefuse.judges.local.config import LocalModelConfig

__all__ = [
    "CascadeStageConfig",
    "CircuitConfig",
    "JudgeConfig",
    "PanelConfig",
    "PanelConfigError",
    "RetryConfig",
    "load_panel_config",
    "parse_panel_config",
]

Backend = str
"""``auto`` or a registered judge backend name (checked against the registry on validation)."""
ElicitationMode = Literal["sc", "mp", "logprob"]
FallbackMode = Literal["sc", "mp", "none"]
PromptStyle = Literal["delimited", "plain"]

_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class PanelConfigError(InputError, ValueError):
    """A panel configuration that cannot be used; the message names the file and field."""


class RetryConfig(BaseModel):
    """Retries with backoff on 429/5xx/timeouts (see :mod:`judgefuse.judges.transport.retry`)."""

    model_config = ConfigDict(extra="forbid")

    attempts: int = Field(default=3, ge=1, le=20)
    base_delay_s: float = Field(default=0.5, ge=0.0)
    max_delay_s: float = Field(default=20.0, ge=0.0)


class CircuitConfig(BaseModel):
    """The judge's circuit breaker (see :mod:`judgefuse.judges.circuit`): after
    ``failure_threshold`` consecutive failed votes the judge is cooled down for ``cooldown_s``
    (votes fail fast, no provider call), then probed; each failed probe doubles the cooldown,
    up to ``max_cooldown_s``."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    failure_threshold: int = Field(default=5, ge=1)
    cooldown_s: float = Field(default=30.0, gt=0.0, allow_inf_nan=False)
    max_cooldown_s: float = Field(default=300.0, gt=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _ordered(self) -> CircuitConfig:
        if self.max_cooldown_s < self.cooldown_s:
            raise ValueError(f"max_cooldown_s ({self.max_cooldown_s:g}) must be >= cooldown_s ({self.cooldown_s:g})")
        return self


class JudgeConfig(BaseModel):
    """One judge: which model, through which backend, elicited how."""

    # hide_input_in_errors: a key pasted into the wrong field must not be echoed by an error.
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(min_length=1)
    model: str | None = Field(
        default=None, min_length=1, description="litellm model string, e.g. openai/gpt-4o-mini"
    )
    """Required unless ``external``."""
    external: bool = False
    """The judge runs elsewhere: its votes are posted to ``POST /v1/fuse`` (no model, no
    provider client; asked through ``/v1/judge`` it gives an invalid vote)."""
    backend: Backend = "auto"
    openai_compatible: bool = False
    """The endpoint at ``api_base`` speaks the OpenAI protocol (``auto`` then picks ``direct``)."""
    api_base: str | None = None
    api_key_env: str | None = None
    """Name of the environment variable holding the key (read when the judge is built)."""
    mode: ElicitationMode = "sc"
    samples: int = Field(default=10, ge=1, le=100)
    """MP: how many samples."""
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    """Default: 0.7 for MP, 0 for SC and logprob."""
    max_tokens: int | None = Field(default=None, ge=1)
    """SC/MP reply budget (None: the provider's). Logprob mode always asks for one token."""
    top_logprobs: int = Field(default=5, ge=1, le=20)
    timeout_s: float = Field(default=60.0, gt=0.0)
    """The budget of one vote, retries included (both orders run concurrently with position_swap)."""
    max_concurrency: int = Field(default=8, ge=1)
    """Calls in flight to this judge at once (MP samples count one each), shared fairly between
    tenants (:mod:`judgefuse.judges.fair_limiter`)."""
    max_concurrency_per_tenant: int | None = Field(default=None, ge=1)
    """Calls one tenant may have in flight to this judge (None: all ``max_concurrency``). Below
    ``max_concurrency`` it keeps slots free for other tenants during one tenant's burst, so they
    do not wait for a slot to free; offline callers (no tenant) may use every slot."""
    retries: RetryConfig = Field(default_factory=RetryConfig)
    circuit: CircuitConfig = Field(default_factory=CircuitConfig)
    """Cool down a judge that keeps failing (on by default; ``circuit: {enabled: false}``)."""
    position_swap: bool = False
    prompt_style: PromptStyle = "delimited"
    """The prompt template style (:mod:`judgefuse.prompts.render`, "Styles"): ``delimited`` fences
    the item in nonce-tagged blocks (the default: safest against hostile answers); ``plain`` heads
    it with ``Output (a):`` / ``Output (b):`` in fewer words, which small local models followed
    more consistently (measured in benchmarks/results/README.md)."""
    structured_output: bool = True
    """SC (and a fuser): constrain the reply to the verdict JSON schema with ``response_format``
    where the backend supports it; a backend that refuses gets prompt-and-parse, remembered
    (:mod:`judgefuse.judges.structured_output`)."""
    fallback_mode: FallbackMode = "sc"
    """Logprob mode, when the provider cannot return logprobs: judge in this mode instead
    (``none``: an invalid vote with the reason). Ignored by SC and MP."""
    use_n: bool | None = None
    """MP: True asks for ``n`` choices in one request; False sends one call per sample;
    None tries ``n`` and falls back to per-sample calls when the provider says it is unsupported."""
    seed: int = Field(default=0, ge=0)
    """MP per-sample calls use seeds ``seed, seed + 1, ...``; SC/logprob send no seed."""
    adaptive: bool = False
    """MP: draw the samples in rounds and stop early (:mod:`judgefuse.judges.adaptive`);
    ``samples`` is then the maximum."""
    round_size: int = Field(default=1, ge=1, le=100)
    """Adaptive MP: samples per round after the first (the first draws ``max(round_size,
    min_samples)``)."""
    min_samples: int = Field(default=3, ge=1, le=100)
    """Adaptive MP: valid samples needed before the Bayesian stop may fire."""
    stop_confidence: float = Field(default=0.9, gt=0.5, le=1.0)
    """Adaptive MP: stop when P(majority letter's sample probability > 1/2) reaches this."""
    cache: bool = False
    """Put an in-process response cache in front of this judge."""
    max_raw_bytes: int = Field(default=16 * 1024, ge=256, le=16 * 1024 * 1024)
    """The most UTF-8 bytes of the model's raw reply (and of the explanation) a vote keeps; a cut
    is noted in the vote's notes (see :mod:`judgefuse.judges.finalise`)."""
    local: LocalModelConfig | None = None

    @field_validator("temperature")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and not math.isfinite(value):
            raise ValueError("temperature must be finite")
        return value

    @field_validator("backend")
    @classmethod
    def _registered_backend(cls, value: str) -> str:
        known = available_backends()
        if value != "auto" and value not in known:
            raise ValueError(f"unknown backend {value!r}; use auto or one of: {', '.join(known)}")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME_RE.match(value):
            # Never echo the value: it may be a key pasted by mistake.
            raise ValueError(
                "api_key_env must be the NAME of an environment variable (letters, digits, '_'), "
                "not the key itself"
            )
        return value

    @model_validator(mode="after")
    def _resolve(self) -> JudgeConfig:
        if self.external:
            if self.model is not None or self.local is not None or self.api_base is not None:
                raise ValueError("an external judge has no model, api_base or local entry "
                                 "(its votes are posted to /v1/fuse)")
        elif self.model is None:
            raise ValueError("model is required (or external: true for a judge whose votes are posted)")
        if self.temperature is None:
            self.temperature = 0.7 if self.mode == "mp" else 0.0
        if self.local is not None:
            if self.api_base is not None:
                raise ValueError("set either local (a server the panel starts) or api_base, not both")
            if self.use_n is None:
                self.use_n = False
        if self.max_concurrency_per_tenant is not None and self.max_concurrency_per_tenant > self.max_concurrency:
            raise ValueError(
                f"max_concurrency_per_tenant ({self.max_concurrency_per_tenant}) must be <= max_concurrency "
                f"({self.max_concurrency})"
            )
        if self.backend == "direct" and self.api_base is None and self.local is None:
            raise ValueError("backend 'direct' needs api_base (or local)")
        return self

    def resolved_backend(self) -> str:
        """The backend ``auto`` stands for (see the module docstring)."""
        if self.backend != "auto":
            return self.backend
        if self.model is None:  # an external judge: never called
            return "litellm"
        has_endpoint = self.api_base is not None or self.local is not None
        if has_endpoint and (self.model.startswith("openai/") or self.openai_compatible or self.local is not None):
            return "direct"
        return "litellm"

    def wire_model(self, backend: str | None = None) -> str:
        """The model name sent on ``backend``: direct drops one leading ``openai/``."""
        if self.model is None:
            return ""
        if (backend or self.resolved_backend()) == "direct":
            return self.model.removeprefix("openai/") or self.model
        return self.model


class CascadeStageConfig(BaseModel):
    """One ``cascade:`` entry: the judges the stage adds, their fusion, its acceptance threshold.

    ``judges`` is a judge name or a list of them (names of this panel's judges); ``method`` fuses
    a multi-judge stage (a voting method name); ``threshold`` None means "not tuned yet: never
    accepts" (``judgefuse tune --cascade`` prints the tuned values).
    """

    model_config = ConfigDict(extra="forbid")

    judges: list[str] = Field(min_length=1)
    method: str = Field(default="majority", min_length=1)
    threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    name: str | None = None

    @field_validator("judges", mode="before")
    @classmethod
    def _one_name(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("judges")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if any(not name for name in value):
            raise ValueError("judge names must be non-empty")
        if len(set(value)) != len(value):
            raise ValueError(f"a stage names a judge twice: {value}")
        return value


class PanelConfig(BaseModel):
    """A panel: judges, how their votes are fused, how many must answer, and the deadline."""

    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field(default="panel", min_length=1)
    judges: list[JudgeConfig] = Field(min_length=1)
    fusion: str = Field(default="mean_probability", min_length=1)
    """A fusion method name, validated against fusion's registry by the caller. The default,
    ``mean_probability``, never answers a confidence above the most confident vote for its answer
    (a vote share such as ``majority``'s says 1.0 whenever the judges agree): the honest rule
    before labels exist; the service's refit promotes a learned method once they do."""
    fuser: JudgeConfig | None = None
    """The fuser model when ``fusion`` is ``fuser`` (judged with the fuser prompt)."""
    quorum: int | float = 1
    """Minimum valid votes: an int count (>= 1), or a fraction in (0, 1] of the judges."""
    deadline_s: float | None = Field(default=None, gt=0.0)
    promote_on: Literal["both", "brier", "review_load"] = "both"
    """When the service promotes a refitted learned-fusion model (with the threshold tuned for
    it): ``both`` (default) needs a cross-fitted Brier no worse than the voting method's AND a
    review load at the target precision no higher; ``brier`` or ``review_load`` weigh one."""
    cascade: list[CascadeStageConfig] | None = None
    """Optional cascade (cheapest stage first; see :mod:`judgefuse.fusion.cascade`)."""
    cascade_fallback: Literal["review", "panel"] = "review"
    """After the last stage: human review, or the full panel fused with ``fusion``."""
    cascade_panel_threshold: float | None = Field(default=0.0, ge=0.0, le=1.0)
    """With fallback ``panel``: the panel's verdict is accepted at this confidence (0: always)."""
    audit_rate: float = Field(default=0.05, ge=0.0, le=1.0, allow_inf_nan=False)
    """The service's review loop: the share of auto-accepted verdicts also sent to the review
    queue (an audit), drawn at decision time; the rate in force is stored with each verdict."""
    audit_sampling: Literal["uniform", "active"] = "uniform"
    """How the service draws audits: ``uniform`` (default: every auto-accepted verdict at the
    audit rate) or ``active`` (by confidence band, at Neyman rates averaging the audit rate,
    floored at half of it: :mod:`judgefuse.calibration.audit_bands`). Opt-in: on the shared data
    sets active audits gave intervals 0.92-1.02 as wide as uniform ones at equal labels."""
    review_shows_verdict: bool = False
    """The review queue shows annotators the judges' verdict (off by default: anchoring)."""
    on_drift: Literal["review_everything", "raise_threshold", "alert_only"] = "review_everything"
    """What the service does when the precision monitor of the routing threshold alarms (its
    upper bound fell below the threshold's target): ``review_everything`` (default: every new
    verdict routed by that threshold version goes to human review, reason ``drift_alarm``),
    ``raise_threshold`` (auto-accept only at confidence >= the threshold moved halfway to 1),
    ``alert_only`` (route as before; the event, /v1/monitor and /metrics say it). Either way it
    lasts until a new threshold version is tuned or an operator clears it."""
    label_budget_per_day: float | None = Field(default=None, gt=0.0, allow_inf_nan=False)
    """Labels per day the service may ask for: when set, the audit rate of new verdicts is
    planned from it and the last day's traffic per stratum (instead of ``audit_rate``)."""

    @field_validator("quorum", mode="before")
    @classmethod
    def _not_bool(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("quorum must be a count or a fraction, not a boolean")  # noqa: TRY004 - pydantic wants ValueError
        return value

    @field_validator("quorum")
    @classmethod
    def _quorum(cls, value: int | float) -> int | float:  # noqa: PYI041 - int is a count, float a fraction
        if isinstance(value, int):
            if value < 1:
                raise ValueError("a quorum count must be >= 1")
        elif not (math.isfinite(value) and 0.0 < value <= 1.0):
            raise ValueError("a quorum fraction must be in (0, 1]")
        return value

    @model_validator(mode="after")
    def _check(self) -> PanelConfig:
        names = [judge.name for judge in self.judges]
        duplicates = sorted({name for name in names if names.count(name) > 1})
        if duplicates:
            raise ValueError(f"judge names must be unique; repeated: {duplicates}")
        if isinstance(self.quorum, int) and self.quorum > len(self.judges):
            raise ValueError(f"quorum {self.quorum} exceeds the number of judges ({len(self.judges)})")
        if self.cascade is not None:
            if not self.cascade:
                raise ValueError("cascade must list at least one stage (or be omitted)")
            known = set(names)
            for index, stage in enumerate(self.cascade):
                unknown = [name for name in stage.judges if name not in known]
                if unknown:
                    raise ValueError(f"cascade[{index}] names unknown judges {unknown}; the panel has {names}")
        elif self.cascade_fallback == "panel":
            raise ValueError("cascade_fallback 'panel' needs a cascade")
        return self

    def quorum_count(self) -> int:
        """The minimum number of valid votes (a fraction is rounded up, at least 1)."""
        if isinstance(self.quorum, int):
            return self.quorum
        return max(1, math.ceil(self.quorum * len(self.judges) - 1e-9))


def _describe(exc: ValidationError, source: str) -> PanelConfigError:
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        lines.append(f"{source}: {field_path(error['loc'], empty='(top level)')}: {error['msg']}")
    return PanelConfigError("\n".join(lines))


def parse_panel_config(data: Any, *, source: str = "<panel>") -> PanelConfig:
    """Validate an already-loaded mapping; errors name ``source`` and the field path."""
    if not isinstance(data, dict):
        raise PanelConfigError(f"{source}: a panel must be a mapping, got {type(data).__name__}")
    try:
        return PanelConfig.model_validate(data)
    except ValidationError as exc:
        raise _describe(exc, source) from None


def load_panel_config(path: str | Path) -> PanelConfig:
    """Read and validate a panel YAML file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PanelConfigError(f"{path}: cannot open: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise PanelConfigError(f"{where}: {problem}") from None
    return parse_panel_config(data, source=str(path))
