"""The service's settings: one ``Settings(BaseSettings)``, validated when the app starts.

The fields are nested by the slice that reads them: ``settings.storage``, ``settings.web``,
``settings.judging``, ``settings.learning``, ``settings.estimates``, ``settings.review``,
``settings.monitoring`` and ``settings.server`` (e.g. ``settings.review.review_lease_s``).

Sources, highest priority first: keyword arguments, environment variables, then an optional
YAML file (``judgefuse serve --config FILE`` / :func:`load_settings`). Environment variables
are ``JUDGEFUSE_<SECTION>__<FIELD>`` (dicts and lists as JSON, e.g.
``JUDGEFUSE_WEB__API_KEYS='{"tenant-a": "<sha256>"}'``); an old flat variable
(``JUDGEFUSE_API_KEYS``) is refused at start with the new name. Keyword arguments and YAML
accept both the nested form (``review: {review_lease_s: 60}``) and the old flat key
(``review_lease_s: 60``), never both for one field.

Tenant API keys are stored as SHA-256 hex digests only (``python -c "import hashlib;
print(hashlib.sha256(b'my-key').hexdigest())"``); the service never holds a plain key.
With no key configured the service runs **open**: every request is tenant ``default`` and a
warning is logged at start (the single-curl demo). ``auth_disabled=True`` forces that mode.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from judgefuse.errors import InputError
from judgefuse.field_path import field_path
from judgefuse.fusion.capabilities import REFIT_METHOD

__all__ = [
    "DEFAULT_TENANT",
    "EstimatesSettings",
    "JudgingSettings",
    "LearningSettings",
    "MonitoringSettings",
    "ReviewSettings",
    "ServerSettings",
    "Settings",
    "SettingsError",
    "StorageSettings",
    "WebSettings",
    "env_name",
    "env_names",
    "load_settings",
]

DEFAULT_TENANT = "default"
_TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class SettingsError(InputError, ValueError):
    """Settings that cannot be used (the message names the field)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True, validate_default=True)


class StorageSettings(_Section):
    """Where verdicts are kept and for how long (:mod:`judgefuse.service.storage`, retention)."""

    storage_url: str = "sqlite:///./judgefuse.sqlite3"
    """``sqlite:///path`` (embedded default), ``redis://host:port/db`` (shared by replicas), or
    any scheme a storage plugin registers (``judgefuse plugins`` lists them)."""
    sqlite_synchronous: Literal["FULL", "NORMAL"] = "FULL"
    """SQLite durability: FULL (default) survives power loss; NORMAL survives a process kill
    and is much faster on slow disks (one fsync per checkpoint instead of per verdict)."""
    store_items: bool = True
    """Store question and answers with each verdict (False: only the verdict and votes)."""
    retention_days: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)
    """Drop verdict records older than this many days (None or 0: keep everything, the
    default). Records pending review and each panel's newest ``refit_max_labels`` labelled
    records are kept; accumulators, counters, thresholds and models are never dropped. On Redis
    a record that is not queued also expires this long after it was created
    (:mod:`judgefuse.service.ops.retention_job`)."""
    retention_every_s: float = Field(default=3600.0, gt=0.0, allow_inf_nan=False)
    """How often the retention pass runs (also once at start; one replica at a time)."""

    @field_validator("storage_url")
    @classmethod
    def _check_storage(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("storage_url is empty")
        # Any scheme of the storage registry (plugins' included); built when the app starts.
        from judgefuse.service.storage.registry import scheme_of, schemes

        known = schemes()
        if "://" in value and (scheme_of(value) not in known or
                               (scheme_of(value) == "sqlite" and not value.startswith("sqlite:///"))):
            raise ValueError("storage_url must be sqlite:///path or one of "
                             + ", ".join(f"{s}://" for s in known if s != "sqlite"))
        return value


class WebSettings(_Section):
    """Authentication and the HTTP edge (:mod:`judgefuse.service.web`)."""

    api_keys: dict[str, str] = Field(default_factory=dict)
    """tenant -> SHA-256 hex digest of its API key."""
    metrics_token: str | None = None
    """SHA-256 hex digest of the operator's token for ``GET /metrics`` across every tenant and the
    dashboard's cross-tenant tables. With tenant keys configured, ``/metrics`` needs this token
    (every series) or a tenant key (that tenant's series only); no key is a 401."""
    auth_disabled: bool = False
    """Dev mode: no authentication, every request is tenant ``default``."""
    cors_origins: list[str] = Field(default_factory=list)
    """Origins allowed by CORS; empty (default): no CORS headers at all."""
    max_body_bytes: int = Field(default=1 << 20, ge=1024)
    header_timeout_s: float = Field(default=10.0, gt=0.0, le=600.0)
    """A connection whose request headers are not complete this long after it opened (or after
    the previous response) is closed (slow-header clients hold no connection for long)."""
    body_timeout_s: float = Field(default=30.0, gt=0.0, le=3600.0)
    """A request body not fully received this long after the headers is answered 408."""

    @field_validator("api_keys")
    @classmethod
    def _check_keys(cls, value: dict[str, str]) -> dict[str, str]:
        out = {}
        for tenant, digest in value.items():
            if not _TENANT_RE.match(tenant):
                raise ValueError(
                    f"tenant name {tenant!r} must be 1-128 letters, digits, '_', '.', '-'"
                )
            normal = digest.strip().lower()
            if not _SHA256_RE.match(normal):
                # never echo the value: it may be a plain key pasted by mistake
                raise ValueError(
                    f"the key of tenant {tenant!r} must be a SHA-256 hex digest (64 hex "
                    "characters), not the key itself"
                )
            out[tenant] = normal
        digests = list(out.values())
        if len(set(digests)) != len(digests):
            raise ValueError("two tenants share one API key digest")
        return out

    @field_validator("metrics_token")
    @classmethod
    def _check_metrics_token(cls, value: str | None) -> str | None:
        if value is None:
            return None
        normal = value.strip().lower()
        if not _SHA256_RE.match(normal):
            raise ValueError("metrics_token must be a SHA-256 hex digest (64 hex characters), "
                             "not the token itself")
        return normal

    @model_validator(mode="after")
    def _check_token_is_no_tenant_key(self) -> WebSettings:
        if self.metrics_token is not None and self.metrics_token in self.api_keys.values():
            raise ValueError("metrics_token must differ from every tenant's API key")
        return self


class JudgingSettings(_Section):
    """Panels, request limits, admission, single flight and the response cache (:mod:`judgefuse.service.judging`)."""

    panels: list[Path] = Field(default_factory=list)
    """Panel YAML files; empty: judgefuse's packaged default panel (local SmolLM2)."""
    default_panel: str | None = None
    """The panel used when a request names none (default: the first panel)."""
    fusion_method: str | None = None
    """The voting method used until a learned model is promoted (default: each panel's own)."""
    max_text_chars: int = Field(default=100_000, ge=1)
    """Longest question / answer accepted (characters)."""
    max_batch_items: int = Field(default=64, ge=1, le=10_000)
    max_inflight_per_tenant: int = Field(default=256, ge=1)
    """Judge requests one tenant may have in flight at once (each batch item counts one);
    beyond it ``/v1/judge`` answers 429 with ``Retry-After`` before any judge call
    (:mod:`judgefuse.service.judging.admission`). Keeps one tenant's burst from filling the queue at
    the judges that every tenant shares."""
    max_inflight_total: int = Field(default=1024, ge=1)
    """Judge requests this replica takes on at once, every tenant together (429 beyond)."""
    max_metadata_depth: int = Field(default=32, ge=1, le=200)
    """Deepest nesting of a request's ``metadata`` (the object itself is depth 1)."""
    max_metadata_bytes: int = Field(default=64 * 1024, ge=2)
    """Largest ``metadata`` accepted, as compact UTF-8 JSON."""
    single_flight_claim_s: float = Field(default=10.0, gt=0.0, le=3600.0)
    """Lease on an id being judged (renewed while judging): how long replicas wait for a
    replica that died mid-request before judging the id themselves."""
    response_cache_url: str | None = None
    """``redis://...``: every judge's responses cached in Redis, shared by all replicas (keys
    include model, prompt, parameters and the MP sample index, so samples never collapse). A
    Redis outage makes the cache miss, never fails a judge. None (default): judges with
    ``cache: true`` in their panel entry use an in-process LRU."""
    response_cache_ttl_s: float = Field(default=7 * 24 * 3600, gt=0)

    @field_validator("panels")
    @classmethod
    def _check_panels(cls, value: list[Path]) -> list[Path]:
        for path in value:
            if not path.is_file():
                raise ValueError(f"panel file {path} does not exist")
        return value

    @model_validator(mode="after")
    def _check_all(self) -> JudgingSettings:
        if self.fusion_method is not None:
            from judgefuse.fusion import available_methods

            base = self.fusion_method.partition("+")[0]
            if base not in available_methods():
                raise ValueError(
                    f"fusion_method {self.fusion_method!r} is not a registered method "
                    f"({', '.join(available_methods())})"
                )
        return self


class LearningSettings(_Section):
    """Refits of learned fusion and cold-start fits (:mod:`judgefuse.service.learning`)."""

    refit_every_labels: int = Field(default=100, ge=0)
    """Refit learned fusion in the background after this many new labels (0: only on request)."""
    min_labels_for_refit: int = Field(default=50, ge=10)
    refit_max_labels: int = Field(default=20_000, ge=10)
    """Most recent labels a refit reads."""
    refit_folds: int = Field(default=5, ge=2, le=20)
    refit_method: str = REFIT_METHOD
    """The learned method a labelled refit fits and may promote: any refittable method
    (default ``auto``: the cross-validated choice among the voting rules, ``dawid_skene``,
    ``offset_stacked`` and ``stacked``, each with and without Platt scaling, which never takes a
    more complex fuser than the labels show better; ``offset_stacked``, ``stacked``,
    ``dawid_skene+platt``, ``majority+isotonic``, a plugin's)."""
    cold_start_every_verdicts: int = Field(default=200, ge=0)
    """Fit a panel's label-free cold-start method (``fusion: dawid_skene``) in the background
    after this many new verdicts of the panel (0: only on request, ``POST /v1/fusion/refit``
    with ``cold_start: true``)."""
    cold_start_window: int = Field(default=5000, ge=10)
    """The newest verdicts whose votes a cold-start fit reads (labelled or not)."""
    cold_start_min_verdicts: int = Field(default=50, ge=2)
    """Fewer stored verdicts with a valid vote than this: no cold-start fit yet."""
    state_ttl_s: float = Field(default=2.0, ge=0.0)
    """How long a replica trusts its cached threshold/model before re-reading storage."""
    max_signals_per_vote: int = Field(default=16, ge=0, le=64)
    """Most ``signals`` one posted vote may carry (``POST /v1/fuse``; more is a 422 naming
    ``signals``). Bounded learning: docs/design.md, 'Bounded learning'."""
    max_signal_name_chars: int = Field(default=64, ge=1, le=256)
    """Longest signal name a posted vote may use (longer is a 422)."""
    max_signals_per_judge: int = Field(default=16, ge=0, le=256)
    """Distinct signal names per judge a refit learns from: the most frequent in the labelled
    records; the others are ignored for learning, and the refit's ``reason`` says how many."""
    refit_max_features: int = Field(default=256, ge=4, le=4096)
    """Most features a refit's model may have (5 per judge plus its signals): signals are cut
    to fit, and a panel whose judges alone need more is not refitted."""
    refit_timeout_s: float = Field(default=600.0, gt=0.0, le=86_400.0, allow_inf_nan=False)
    """Wall-clock (and CPU) budget of one refit's worker process: over it the worker is killed
    and the refit fails with that reason; the gateway goes on."""
    refit_memory_mb: int = Field(default=2048, ge=64, le=1_048_576)
    """Memory the refit's worker may add (address space over what it starts with): beyond it
    the refit fails cleanly with that reason."""
    refit_workers: int = Field(default=1, ge=1, le=64)
    """Refit worker processes running at once on this replica (more refits wait their turn)."""

    @field_validator("refit_method")
    @classmethod
    def _check_refit_method(cls, value: str) -> str:
        from judgefuse.fusion.capabilities import known_capabilities

        found = known_capabilities(value)
        if found is None or not found.refittable:
            raise ValueError(
                f"{value!r} is not a refittable fusion method (it must be fitted from labels "
                "and save its parameters, e.g. stacked or dawid_skene+platt)"
            )
        return value


class EstimatesSettings(_Section):
    """Calibration and panel-structure estimates (:mod:`judgefuse.service.estimates`)."""

    calibration_bins: int = Field(default=10, ge=1)
    th_eps: float = 0.1
    panel_structure_window: int = Field(default=2000, ge=10)
    """``GET /v1/calibration``'s ``panel_structure`` reads the panel's newest this many verdicts
    and newest this many labelled ones (Dawid-Skene is refitted on them per query)."""
    panel_structure_ttl_s: float = Field(default=30.0, ge=0.0, allow_inf_nan=False)
    """``panel_structure`` is recomputed at most this often per panel (0: on every query): its
    Dawid-Skene refit costs 80-200 ms at a few thousand verdicts."""
    max_inflight_reports: int = Field(default=1, ge=1, le=1024)
    """Computations over stored verdicts at once (the win rate, the disagreement list, the
    panel structure, the console's lists; :mod:`judgefuse.service.estimates.reports`). Each
    parses and computes in a worker thread, which holds the interpreter's lock a switch interval
    at a time: a second one beside it computes no faster (one lock) but takes the lock from the
    event loop twice as often (a 2,000-verdict win rate polled past its cache: another tenant's
    ``/v1/fuse`` p50 32 ms at 2, 10 ms at 1). A report answered from its cache takes no place."""
    report_wait_s: float = Field(default=1.0, ge=0.0, le=60.0, allow_inf_nan=False)
    """How long a report past ``max_inflight_reports`` waits in line for a place before its
    429 (with ``Retry-After``), and a win-rate poll past ``report_polls_per_s`` for its turn."""
    report_polls_per_s: float = Field(default=10.0, ge=0.0, le=100_000.0, allow_inf_nan=False)
    """Each tenant's ``/v1/panels/{panel}/winrate`` requests per second, cached or not, in
    bursts of up to a second's worth; one early for its turn waits up to ``report_wait_s``,
    then 429 with ``Retry-After`` (:meth:`judgefuse.service.estimates.reports.Reports.pace`);
    0: unpaced. A cached answer costs the gateway about a millisecond of CPU: four clients
    polling one in a closed loop took ~490 a second and moved another tenant's ``/v1/fuse``
    p99 8x on a loaded 2-core machine."""

    @field_validator("th_eps")
    @classmethod
    def _check_eps(cls, value: float) -> float:
        from judgefuse.calibration import DEFAULT_TH_EPS

        if value not in DEFAULT_TH_EPS:
            raise ValueError(
                f"th_eps must be one of the tracked values {', '.join(f'{e:g}' for e in DEFAULT_TH_EPS)}"
            )
        return value

    @field_validator("calibration_bins")
    @classmethod
    def _check_bins(cls, value: int) -> int:
        if 1000 % value:
            raise ValueError("calibration_bins must divide 1000 (the accumulator's fine bins)")
        return value


class ReviewSettings(_Section):
    """The review loop: audit plan, leases, annotator sessions (:mod:`judgefuse.service.review`)."""

    review_seed: int | None = None
    """Seed of the review loop's draws (audit sampling, queue order); None: fresh entropy.
    Set it for reproducible tests and simulations only."""
    audit_plan_ttl_s: float = Field(default=300.0, ge=0.0, allow_inf_nan=False)
    """How long a replica reuses a panel's planned audit rate (``label_budget_per_day``) before
    re-reading the last day's traffic counters."""
    review_lease_s: float = Field(default=600.0, gt=0.0, le=7 * 24 * 3600, allow_inf_nan=False)
    """How long an annotator holds a leased review item before it returns to the queue."""
    review_max_lease: int = Field(default=100, ge=1, le=1000)
    """Most items one ``GET /v1/review/next`` may lease."""
    review_max_held_per_annotator: int = Field(default=100, ge=1, le=100_000)
    """Most items one annotator may hold leased at once (409 beyond; the page holds one per
    panel). Labelled, skipped and expired items free their place."""
    review_max_held_per_caller: int = Field(default=1000, ge=1, le=1_000_000)
    """Most items one tenant key may hold leased at once through ``GET /v1/review/next``,
    whatever annotator names it leases for (409 beyond)."""
    review_session_secret: SecretStr | None = None
    """Signs the annotator page's session cookie (``/review``); None: a random secret per
    process (sessions then end on restart and are not shared between replicas)."""
    review_session_s: float = Field(default=12 * 3600, gt=0.0, le=30 * 86400, allow_inf_nan=False)
    """How long an annotator page session lasts."""


class MonitoringSettings(_Section):
    """Precision monitors (:mod:`judgefuse.service.monitoring`)."""

    monitor_alpha: float = Field(default=0.05, gt=0.0, lt=1.0, allow_inf_nan=False)
    """False-alarm budget of each precision monitor (one per tenant, panel and threshold
    version): the chance it ever alarms while the auto-accept precision stays at or above the
    target is at most this, however often it is read (:mod:`judgefuse.service.monitoring.monitor`)."""
    metrics_max_age_s: float = Field(default=10.0, ge=0.0, le=3600.0, allow_inf_nan=False)
    """How old a judge's vote-drift report on ``/metrics`` may be: each is computed in a worker
    thread (~100 ms a judge at 10,000 votes) at most once per this many seconds while votes
    arrive (:mod:`judgefuse.service.monitoring.snapshot`); 0: every scrape recomputes it.
    ``GET /v1/monitor`` always reports every vote so far."""


class ServerSettings(_Section):
    """The HTTP server ``judgefuse serve`` starts."""

    host: str = "127.0.0.1"
    port: int = Field(default=8000, ge=0, le=65535)
    log_level: str = "info"
    workers: int = Field(default=1, ge=1, le=64)
    """Server processes (``judgefuse serve --workers N``), each with its own event loop, sharing
    the configured store (SQLite in WAL mode, Redis or PostgreSQL)."""
    shed_loop_lag_s: float = Field(default=0.01, ge=0.0, le=10.0, allow_inf_nan=False)
    """Backpressure (:mod:`judgefuse.service.web.backpressure`): 429 on the judging and label
    routes while every event-loop timer of the last window fired later than this (the loop is
    past capacity); 0: never."""
    shed_wait_s: float = Field(default=0.05, ge=0.0, le=60.0, allow_inf_nan=False)
    """Backpressure (:mod:`judgefuse.service.web.backpressure`): 429 on ``/v1/judge``,
    ``/v1/fuse`` and their batches for a request that waited longer than this for the event loop between its headers
    being read and admission (with ``judgefuse serve``'s HTTP protocol, which stamps that
    time); 0: never."""
    shed_sojourn_s: float = Field(default=0.05, ge=0.0, le=60.0, allow_inf_nan=False)
    """Backpressure (:mod:`judgefuse.service.web.backpressure`): 429 on ``/v1/judge``,
    ``/v1/fuse`` and their batches while every verdict of the last window spent longer than this
    in the gateway beyond its judge calls (``timings.overhead_s``: verdicts are queueing, for the
    store or the loop); raise it on a disk whose fsync alone takes this long; 0: never. 50 ms:
    past ``/v1/fuse``'s capacity the work gate (``max_inflight_work``) refuses first, and at
    25 ms this gate refused most of ``/v1/judge``'s 429s at 80% of its max on a noisy machine
    (``benchmarks/results/sojourn_ab.txt``)."""
    max_inflight_work: int = Field(default=8, ge=0, le=100_000)
    """Backpressure (:mod:`judgefuse.service.web.backpressure`): at most this many ``/v1/judge``
    and ``/v1/fuse`` requests doing the gateway's own work at once (admitted, not answered, not
    waiting for their judge calls, a fuser model or another request's verdict for the same id;
    a request waiting for the store's commit counts: past ``/v1/fuse``'s capacity the store is
    the queue this bounds); more wait their turn up to ``work_wait_s``, then 429. About
    this many over the gateway's service rate is the longest an admitted request queues inside
    it (8 at ~750/s: ~11 ms; 32 let the loop's turns grow so long past capacity that new
    connections waited up to a second to be read); 0: no bound."""
    work_wait_s: float = Field(default=0.05, ge=0.0, le=60.0, allow_inf_nan=False)
    """Backpressure: how long a judging request past ``max_inflight_work`` may wait for a place
    before its 429 (0: refused at once), counted from when its headers were read while 32 or
    more are in flight (a queue): its wait in front of the app (``shed_wait_s``) is spent from
    the same budget, so the two waits together stay within it. Absorbs bursts below capacity
    (30 identical requests at once, many judges answering together); above capacity it bounds
    what waiting adds to an admitted request."""
    work_lifo_after_s: float = Field(default=0.02, ge=0.0, le=60.0, allow_inf_nan=False)
    """Backpressure: once judging requests have waited for a place past ``max_inflight_work``
    without a break for this long (a line that does not drain: the gateway is past capacity),
    a freed place goes to the newest of them instead of the oldest; the oldest run out their
    ``work_wait_s`` and get 429 as before (adaptive LIFO,
    :mod:`judgefuse.places`). In order, every request admitted past
    capacity had waited nearly all of ``work_wait_s``. 20 ms: at 100 ms the first tenth of a
    second of an overload was still served in order, enough to hold the p99 up; 0: always in
    order."""
    max_inflight_labels: int = Field(default=64, ge=1)
    """Label and review requests (``/v1/feedback``, review next/skip/label) in flight at once;
    keep it below the storage's connection pool. More wait up to ``label_wait_s``, then 429."""
    label_wait_s: float = Field(default=2.0, ge=0.0, le=60.0, allow_inf_nan=False)

    @field_validator("log_level")
    @classmethod
    def _check_level(cls, value: str) -> str:
        if value.lower() not in ("critical", "error", "warning", "info", "debug"):
            raise ValueError("log_level must be critical, error, warning, info or debug")
        return value.lower()


_SECTIONS: dict[str, type[_Section]] = {
    "storage": StorageSettings, "web": WebSettings, "judging": JudgingSettings,
    "learning": LearningSettings, "estimates": EstimatesSettings, "review": ReviewSettings,
    "monitoring": MonitoringSettings, "server": ServerSettings,
}
_SECTION_OF: dict[str, str] = {field: name for name, section in _SECTIONS.items()
                               for field in section.model_fields}
"""Every setting's section, read off the section models (a new field needs no entry here)."""
"""Each old flat field name -> the section that holds it now (same field name inside)."""

_ENV_PREFIX = "JUDGEFUSE_"


def env_name(field: str) -> str:
    """The environment variable of a (flat) field name: ``JUDGEFUSE_<SECTION>__<FIELD>``."""
    return f"{_ENV_PREFIX}{_SECTION_OF[field].upper()}__{field.upper()}"


def env_names() -> set[str]:
    """Every settings environment variable (``JUDGEFUSE_<SECTION>__<FIELD>``)."""
    return {env_name(field) for field in _SECTION_OF}


def _nest(data: Any) -> Any:
    """Move every known flat key of ``data`` into its section; refuse one given both ways."""
    if not isinstance(data, dict) or not any(key in _SECTION_OF for key in data):
        return data
    out: dict[str, Any] = {k: v for k, v in data.items() if k not in _SECTION_OF}
    for key, value in data.items():
        section = _SECTION_OF.get(key)
        if section is None:
            continue
        current = out.get(section)
        if current is None:
            current = {}
        elif isinstance(current, BaseModel):
            current = current.model_dump(exclude_unset=True)
        elif isinstance(current, dict):
            current = dict(current)
        else:
            raise SettingsError(f"{section}: expected a mapping of its fields")
        if key in current:
            raise SettingsError(
                f"{key} is given both flat ({key}) and nested ({section}.{key}); give it once"
            )
        current[key] = value
        out[section] = current
    return out


def _check_old_env() -> None:
    """Refuse the flat environment variables of before the nesting, naming the new one."""
    upper = {name.upper() for name in os.environ}
    old = sorted(f for f in _SECTION_OF if f"{_ENV_PREFIX}{f.upper()}" in upper)
    if old:
        raise SettingsError(
            "environment variables were renamed (nested by section): "
            + "; ".join(f"{_ENV_PREFIX}{f.upper()} -> {env_name(f)}" for f in old)
        )


class _Nested(PydanticBaseSettingsSource):
    """A source (keyword arguments, YAML) whose old flat keys move into their sections."""

    def __init__(self, settings_cls: type[BaseSettings], inner: PydanticBaseSettingsSource):
        super().__init__(settings_cls)
        self._inner = inner

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        nested = _nest(self._inner())
        assert isinstance(nested, dict)
        return nested


class _NestedYaml(YamlConfigSettingsSource):
    """The YAML file, its old flat keys moved into their sections."""

    def __call__(self) -> dict[str, Any]:
        nested = _nest(super().__call__())
        assert isinstance(nested, dict)
        return nested


class Settings(BaseSettings):
    """Everything the gateway reads at start; see the module docstring for the sources."""

    model_config = SettingsConfigDict(
        env_prefix=_ENV_PREFIX, env_nested_delimiter="__", extra="forbid",
        hide_input_in_errors=True, validate_default=True,
    )

    storage: StorageSettings = Field(default_factory=StorageSettings)
    web: WebSettings = Field(default_factory=WebSettings)
    judging: JudgingSettings = Field(default_factory=JudgingSettings)
    learning: LearningSettings = Field(default_factory=LearningSettings)
    estimates: EstimatesSettings = Field(default_factory=EstimatesSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    monitoring: MonitoringSettings = Field(default_factory=MonitoringSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        _check_old_env()
        sources: list[PydanticBaseSettingsSource] = [
            _Nested(settings_cls, init_settings), env_settings
        ]
        if settings_cls.model_config.get("yaml_file"):
            sources.append(_NestedYaml(settings_cls))
        return tuple(sources)

    @model_validator(mode="before")
    @classmethod
    def _nest_flat(cls, data: Any) -> Any:
        return _nest(data)

    @property
    def open_mode(self) -> bool:
        """True when requests are not authenticated (tenant ``default``)."""
        return self.web.auth_disabled or not self.web.api_keys


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from keyword overrides, the environment and (optionally) a YAML file.

    Raises :class:`SettingsError` naming the field (and the file) on a bad value.
    """
    from pydantic import ValidationError

    cls: type[Settings] = Settings
    if config_file is not None:
        path = Path(config_file)
        if not path.is_file():
            raise SettingsError(f"config file {path} does not exist")
        cls = type(
            "FileSettings", (Settings,), {"model_config": {**Settings.model_config, "yaml_file": path}}
        )
    try:
        return cls(**overrides)
    except ValidationError as exc:
        where = f"{config_file}: " if config_file is not None else ""
        lines = [
            f"{where}{field_path(err['loc'], empty='(settings)')}: {err['msg']}"
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise SettingsError("invalid settings:\n" + "\n".join(lines)) from None
