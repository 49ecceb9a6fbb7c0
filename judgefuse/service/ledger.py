"""The ledger grammar: what a verdict and a label count toward, and how those counts are named.

Every estimate the service makes from live traffic (calibration per key, population estimates,
stratified tuning, the audit plan, the cold start's rounds) is a read of per-hour counters
that storage adds to atomically when a verdict is stored or labelled. Judging writes them,
review stamps the strata they are split by, estimates and learning read them: one module owns
their names so that a key written in one slice is the key read in another, and no reader
imports a writer (or the other way round) just to spell a key.

**Calibration accumulators** (per tenant; storage scopes them), four ``/``-separated parts, each
percent-quoted so a judge named ``openai/gpt-4o`` cannot break the split::

    {panel}/method/{fusion method}/fused    the fused verdict under the method that produced it
    {panel}/judge/{judge}/{mode}            one judge's valid votes (mode: sc, mp, logprob)
    {panel}/mode/all/{mode}                 every judge's valid votes of one mode, pooled

Invalid votes (no choice: error, timeout, abstention) and undecided verdicts are **counted
separately**, never fed as 0.5-and-wrong: ``{panel}/abstain/judge/{judge}`` and
``{panel}/abstain/method/{method}`` hold one integer field ``n``. Calibration metrics are thus
over answered items; the abstention counts sit beside them in ``GET /v1/calibration``.

**Agreement counters.** A judge's tie vote (``JudgeVote.tie``: the answers are equally good) is
a judgment, not a failure (docs/design.md, 'Fusion'): it feeds no calibration key (there is no
letter to be right or wrong) and is not an abstention. What every judge and method answered
against each A/B label is counted in ``{panel}/agreement/judge/{judge}`` and
``{panel}/agreement/method/{method}``, one field per (answer, label) pair,
``{answer}|{label}`` (:func:`agreement_field`) with answer ``A``, ``B``, ``tie`` or ``none``
(no answer: the same votes and verdicts the abstention counters count). The tie counts, the
confusion matrix and Cohen's kappa of ``GET /v1/calibration`` are reads of these fields, so
they follow relabels, undos and the window like every counter; a counter written before them
reads as zero (an older tie vote stays in the abstention count it was written to).

**Stratum copies.** Per review stratum (docs/design.md, 'The review loop'), every label also
feeds a copy of its method and judge keys with a fifth part, the stratum key of the labelled
verdict (:func:`label_stratum_key`)::

    {panel}/method/{fusion method}/fused/{stratum}
    {panel}/judge/{judge}/{mode}/{stratum}

The four-part keys hold all labels (the labelled-sample metrics); the population estimates read
the stratum copies.

**Stratum keys** (the names the population estimators use, one per sampling design; the stamp
they come from is drawn at decision time by :mod:`judgefuse.service.review.sampling`):

* ``review``: verdicts routed to review (N = their count, labels = theirs);
* ``auto@{rate}``: verdicts auto-accepted while the audit rate was ``rate`` (N = all of them,
  audited or not; labels = the audit labels only: a random sample of the stratum);
* ``inline@review`` / ``inline@auto``: verdicts labelled inline, by route (N = their count,
  labels = all of them); ``inline@auto`` is part of what was auto-accepted;
* ``unsolicited``: labels of verdicts that were never queued (kept apart, never in the
  population estimates: nobody chose them at random).

**Label kind counters.** A ``tie`` or ``both_bad`` label says neither answer is the better one,
so it moves no calibration key (accuracy and calibration are over A/B labels only) and adds
``n = 1`` to ``{panel}/labels/{kind}`` instead (three parts: no four-part listing reads it as a
calibration key). Relabelling or undoing subtracts it like any other increment.

**Traffic counters.** Every stored verdict adds ``n = 1`` to ``{panel}/traffic/{method}/{key}``
and ``{panel}/traffic/*/{key}`` (the panel's total, for per-judge estimates) in the same atomic
step as the insert, with ``key`` its population stratum: storage keeps them per hour, so N_s of
any window is a read of O(hours) counters.

:func:`label_increments` and :func:`traffic_increments` are the pure functions handed to
``Storage.set_label`` and ``Storage.save_verdict``: storage calls :func:`label_increments` for
the new label (and the old one when relabelling, subtracting it), so a relabel never double
counts, and puts the increments in the hour bucket of the verdict's ``created_at``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote

from judgefuse.calibration import FIXED_POINT_SCALE, CalibrationAccumulator
from judgefuse.fusion.verdict import is_tie
from judgefuse.judges.types import TIE_LABELS
from judgefuse.service.storage import (
    DECIDED,
    LabelKind,
    LabelLedger,
    Number,
    ReviewStamp,
    VerdictRecord,
)

__all__ = [
    "ACCUMULATOR",
    "ALL_METHODS",
    "INLINE_AUTO",
    "INLINE_REVIEW",
    "REVIEW",
    "UNSOLICITED",
    "AccumulatorKey",
    "AGREEMENT_ANSWERS",
    "abstain_key",
    "accepted_stratum",
    "agreement_field",
    "agreement_key",
    "auto_key",
    "is_population_stratum",
    "judge_key",
    "label_increments",
    "label_kind_counts",
    "label_kind_key",
    "label_stratum_key",
    "method_key",
    "mode_key",
    "panel_prefix",
    "parse_key",
    "population_stratum_key",
    "rate_of",
    "solicited",
    "stratum_copy",
    "prediction_fields",
    "traffic_counts",
    "traffic_predictions",
    "traffic_increments",
    "traffic_key",
    "traffic_prefix",
    "traffic_stratum",
]

ACCUMULATOR = CalibrationAccumulator()
"""The field schema every calibration key uses (1000 fine bins, TH eps 0.05/0.10/0.15)."""

REVIEW = "review"
UNSOLICITED = "unsolicited"
INLINE_REVIEW = "inline@review"
INLINE_AUTO = "inline@auto"
ALL_METHODS = "*"
"""The method part of the panel-wide traffic counter."""


def _q(part: str) -> str:
    return quote(part, safe="")


# ---------------------------------------------------------------- calibration accumulator keys
@dataclass(frozen=True)
class AccumulatorKey:
    panel: str
    kind: str  # method | judge | mode | abstain | agreement (| traffic: listed, never reported)
    name: str
    mode: str

    def __str__(self) -> str:
        return "/".join(_q(p) for p in (self.panel, self.kind, self.name, self.mode))


def parse_key(key: str) -> AccumulatorKey:
    """A four-part key back into its parts; anything else (a stratum copy, a monitor's key) is a
    ValueError, which is how listings skip them."""
    parts = key.split("/")
    if len(parts) != 4:
        raise ValueError(f"not a service accumulator key: {key!r}")
    return AccumulatorKey(*(unquote(p) for p in parts))


def panel_prefix(panel: str) -> str:
    """The prefix every counter of ``panel`` starts with (what a listing of one panel asks for)."""
    return _q(panel) + "/"


def method_key(panel: str, method: str) -> str:
    return str(AccumulatorKey(panel, "method", method, "fused"))


def judge_key(panel: str, judge: str, mode: str) -> str:
    return str(AccumulatorKey(panel, "judge", judge, mode))


def mode_key(panel: str, mode: str) -> str:
    return str(AccumulatorKey(panel, "mode", "all", mode))


def abstain_key(panel: str, kind: str, name: str) -> str:
    return str(AccumulatorKey(panel, "abstain", kind, name))


AGREEMENT_ANSWERS = ("A", "B", "tie", "none")
"""What a judge or method can answer on a labelled verdict (``none``: no answer)."""


def agreement_key(panel: str, kind: str, name: str) -> str:
    """The agreement counter of one judge or method (``kind``); fields :func:`agreement_field`."""
    return str(AccumulatorKey(panel, "agreement", kind, name))


def agreement_field(answer: str, label: str) -> str:
    """The field counting answer ``answer`` (:data:`AGREEMENT_ANSWERS`) on A/B label ``label``."""
    return f"{answer}|{label}"


def stratum_copy(key: str, stratum_key: str) -> str:
    """The per-stratum copy of a four-part accumulator key (its fifth part)."""
    return f"{key}/{_q(stratum_key)}"


# ---------------------------------------------------------------- stratum keys
def auto_key(rate: float) -> str:
    """The stratum key of verdicts auto-accepted under audit rate ``rate`` (exact repr)."""
    return f"auto@{float(rate)!r}"


def rate_of(key: str) -> float | None:
    """The audit rate of an ``auto@{rate}`` key (None for any other key)."""
    if not key.startswith("auto@"):
        return None
    try:
        return float(key.removeprefix("auto@"))
    except ValueError:
        return None


def population_stratum_key(stamp: ReviewStamp) -> str:
    """The traffic stratum a verdict counts in: ``review``, ``auto@{rate}`` or ``inline@...``."""
    if stamp.stratum == "inline":
        return INLINE_AUTO if stamp.route == "auto_accept" else INLINE_REVIEW
    return REVIEW if stamp.stratum == "review" else auto_key(stamp.audit_rate)


def is_population_stratum(key: str) -> bool:
    """Whether ``key`` names a stratum of the population estimates (not ``unsolicited``)."""
    return key in (REVIEW, INLINE_REVIEW, INLINE_AUTO) or rate_of(key) is not None


def accepted_stratum(key: str) -> bool:
    """Whether the stratum ``key`` holds auto-accepted verdicts (auto-accept precision)."""
    return key == INLINE_AUTO or rate_of(key) is not None


def label_stratum_key(record: VerdictRecord) -> str:
    """The stratum a label of ``record`` feeds: ``review``, ``auto@{rate}`` (an audit label),
    ``inline@...`` or ``unsolicited``. A record from before the review loop (no stamp) counts as
    ``review`` when it was routed to review, else as ``unsolicited``."""
    stamp = record.review
    if stamp is None:
        return REVIEW if record.verdict.route == "human_review" else UNSOLICITED
    if stamp.stratum == "review":
        return REVIEW
    if stamp.stratum == "audit":
        return auto_key(stamp.audit_rate)
    if stamp.stratum == "inline":
        return population_stratum_key(stamp)
    return UNSOLICITED


# ---------------------------------------------------------------- traffic counters
def traffic_prefix(panel: str, method: str) -> str:
    """The prefix of (panel, method)'s traffic counters (``method`` ``*``: the whole panel)."""
    return f"{_q(panel)}/traffic/{_q(method)}/"


@lru_cache(maxsize=4096)
def traffic_key(panel: str, method: str, stratum_key: str) -> str:
    """The key of (panel, method)'s traffic counter of one stratum; memoised (three URL quotes,
    twice for every verdict stored: ~1% of a verdict's CPU)."""
    return traffic_prefix(panel, method) + _q(stratum_key)


def traffic_stratum(prefix: str, key: str) -> str:
    """The stratum key of a traffic counter ``key`` listed under ``prefix``."""
    return unquote(key.removeprefix(prefix))


def traffic_increments(
    panel: str, method: str, stamp: ReviewStamp, confidence: float | None = None,
) -> dict[str, Mapping[str, Number]]:
    """What ``save_verdict`` adds for one new verdict: n += 1 in its method's and the panel's
    traffic counter of its stratum. A decided verdict (``confidence``: its fused confidence)
    also adds to its method's counter the prediction sums of the model-assisted estimates
    (:func:`prediction_fields`)."""
    key = population_stratum_key(stamp)
    return {
        traffic_key(panel, method, key): {"n": 1, **prediction_fields(confidence)},
        traffic_key(panel, ALL_METHODS, key): {"n": 1},
    }


def prediction_fields(confidence: float | None) -> dict[str, int]:
    """``pn`` (decided verdicts), ``pc`` and ``pq`` (their confidences and squared
    confidences, fixed point) of one verdict: what
    :mod:`judgefuse.calibration.model_assisted` needs of the unlabelled verdicts
    (docs/design.md, 'The review loop'). Nothing for an undecided verdict."""
    if confidence is None:
        return {}
    c = float(confidence)
    return {"pn": 1, "pc": round(c * FIXED_POINT_SCALE), "pq": round(c * c * FIXED_POINT_SCALE)}


async def traffic_counts(
    storage: LabelLedger, tenant: str, panel: str, method: str, *, since_hour: int | None = None
) -> dict[str, int]:
    """N_s per population stratum key of (panel, method) since ``since_hour`` (strata with no
    verdict in the window are left out)."""
    prefix = traffic_prefix(panel, method)
    out: dict[str, int] = {}
    for raw in await storage.list_accumulators(tenant, prefix):
        stratum = traffic_stratum(prefix, raw)
        if not is_population_stratum(stratum):
            continue
        fields = await storage.read_accumulator(tenant, raw, since_hour=since_hour)
        n = int(fields.get("n", 0))
        if n > 0:
            out[stratum] = n
    return out


async def traffic_predictions(
    storage: LabelLedger, tenant: str, panel: str, method: str, *, since_hour: int | None = None
) -> dict[str, tuple[int, float, float]]:
    """Per population stratum key of (panel, method): (decided verdicts, sum of their
    confidences, sum of the squares) since ``since_hour``, from the :func:`prediction_fields`
    of the traffic counters; strata whose verdicts carry none (written before them) are left out."""
    prefix = traffic_prefix(panel, method)
    out: dict[str, tuple[int, float, float]] = {}
    for raw in await storage.list_accumulators(tenant, prefix):
        stratum = traffic_stratum(prefix, raw)
        if not is_population_stratum(stratum):
            continue
        fields = await storage.read_accumulator(tenant, raw, since_hour=since_hour)
        if int(fields.get("pn", 0)) > 0:
            out[stratum] = (int(fields["pn"]), int(fields.get("pc", 0)) / FIXED_POINT_SCALE,
                            int(fields.get("pq", 0)) / FIXED_POINT_SCALE)
    return out


# ---------------------------------------------------------------- what a label adds
def _add(out: dict[str, dict[str, Number]], key: str, fields: Mapping[str, int]) -> None:
    row = out.setdefault(key, {})
    for field, delta in fields.items():
        row[field] = row.get(field, 0) + delta


def label_kind_key(panel: str, kind: str) -> str:
    """The counter of ``tie`` / ``both_bad`` labels of a panel (field ``n``, per hour)."""
    return f"{_q(panel)}/labels/{_q(kind)}"


def label_increments(record: VerdictRecord, label: LabelKind) -> dict[str, dict[str, Number]]:
    """The accumulator increments one label of one verdict adds (pure; see the module doc)."""
    verdict = record.verdict
    panel = record.panel
    if label not in DECIDED:
        return {label_kind_key(panel, label): {"n": 1}}
    stratum = label_stratum_key(record)
    out: dict[str, dict[str, Number]] = {}
    answer: str
    if verdict.choice is not None:
        answer = verdict.choice
        key = method_key(panel, verdict.method)
        fields = ACCUMULATOR.increments(verdict.confidence, verdict.choice == label)
        _add(out, key, fields)
        _add(out, stratum_copy(key, stratum), fields)
    elif is_tie(verdict):
        answer = "tie"
    else:
        answer = "none"
        _add(out, abstain_key(panel, "method", verdict.method), {"n": 1})
    _add(out, agreement_key(panel, "method", verdict.method), {agreement_field(answer, label): 1})
    for vote in verdict.votes:
        if vote.tie:
            answer = "tie"
        elif vote.choice is None or vote.confidence is None:
            answer = "none"
            _add(out, abstain_key(panel, "judge", vote.judge), {"n": 1})
        else:
            answer = vote.choice
            fields = ACCUMULATOR.increments(vote.confidence, vote.choice == label)
            key = judge_key(panel, vote.judge, vote.mode)
            _add(out, key, fields)
            _add(out, stratum_copy(key, stratum), fields)
            _add(out, mode_key(panel, vote.mode), fields)
        _add(out, agreement_key(panel, "judge", vote.judge), {agreement_field(answer, label): 1})
    return out


async def label_kind_counts(
    storage: LabelLedger, tenant: str, panel: str, *, since_hour: int | None = None
) -> dict[str, int]:
    """How many ``tie`` and ``both_bad`` labels (panel) holds now, all time or since
    ``since_hour`` (by the labelled verdict's hour, like every accumulator)."""
    out: dict[str, int] = {}
    for kind in TIE_LABELS:
        fields = await storage.read_accumulator(tenant, label_kind_key(panel, kind),
                                                since_hour=since_hour)
        out[kind] = int(fields.get("n", 0))
    return out


def solicited(
    strata: Sequence[str], traffic: Mapping[str, int]
) -> tuple[list[int], list[str], dict[str, int]]:
    """What a stratified tuner gets from labelled points with stratum keys ``strata`` and the
    traffic counters ``traffic`` (N_s): the indices of the points it may use (unsolicited
    labels left out: nobody chose them at random), their strata, and N_s with every stratum at
    least as large as its labels (records from before the counters have labels but no count)."""
    keep = [i for i, stratum in enumerate(strata) if stratum != UNSOLICITED]
    kept = [strata[i] for i in keep]
    counts = dict(traffic)
    for stratum in set(kept):
        counts[stratum] = max(counts.get(stratum, 0), kept.count(stratum))
    return keep, kept, counts
