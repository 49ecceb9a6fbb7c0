"""Which calibration accumulators a labelled verdict feeds, and how the service reads them.

Keys (per tenant; storage scopes them), four ``/``-separated parts, each percent-quoted so a
judge named ``openai/gpt-4o`` cannot break the split::

    {panel}/method/{fusion method}/fused    the fused verdict under the method that produced it
    {panel}/judge/{judge}/{mode}            one judge's valid votes (mode: sc, mp, logprob)
    {panel}/mode/all/{mode}                 every judge's valid votes of one mode, pooled

Per review stratum (docs/design.md, 'The review loop'; :mod:`judgefuse.service.review.sampling`),
every label also feeds a copy of its method and judge keys with a fifth part, the stratum key
of the labelled verdict (``review``, ``auto@{rate}`` or ``unsolicited``)::

    {panel}/method/{fusion method}/fused/{stratum}
    {panel}/judge/{judge}/{mode}/{stratum}

The four-part keys are unchanged (all labels, the labelled-sample metrics); the population
estimates read the stratum copies and the traffic counters ``{panel}/traffic/{method}/{stratum}``
(verdict counts, written when a verdict is stored), which this report skips.

Invalid votes (no choice: error, timeout, abstention) and undecided verdicts are **counted
separately**, never fed as 0.5-and-wrong: ``{panel}/abstain/judge/{judge}`` and
``{panel}/abstain/method/{method}`` hold one integer field ``n``. Calibration metrics are
thus over answered items; the abstention counts sit beside them in ``GET /v1/calibration``.

:func:`label_increments` is the pure function passed to ``Storage.set_label``: storage calls it
for the new label (and the old one when relabelling, subtracting it), so a relabel never double
counts. Storage puts the increments in the hour bucket of the verdict's ``created_at``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from judgefuse.calibration import CalibrationAccumulator
from judgefuse.judges.types import Letter
from judgefuse.service.review.sampling import label_stratum_key
from judgefuse.service.storage import Number, Storage, VerdictRecord, hour_of

__all__ = [
    "ACCUMULATOR",
    "AccumulatorKey",
    "calibration_report",
    "label_increments",
    "parse_key",
    "stratum_copy",
]

ACCUMULATOR = CalibrationAccumulator()
"""The field schema every key uses (1000 fine bins, TH eps 0.05/0.10/0.15)."""


def _q(part: str) -> str:
    return quote(part, safe="")


@dataclass(frozen=True)
class AccumulatorKey:
    panel: str
    kind: str  # method | judge | mode | abstain
    name: str
    mode: str

    def __str__(self) -> str:
        return "/".join(_q(p) for p in (self.panel, self.kind, self.name, self.mode))


def parse_key(key: str) -> AccumulatorKey:
    parts = key.split("/")
    if len(parts) != 4:
        raise ValueError(f"not a service accumulator key: {key!r}")
    return AccumulatorKey(*(unquote(p) for p in parts))


def method_key(panel: str, method: str) -> str:
    return str(AccumulatorKey(panel, "method", method, "fused"))


def judge_key(panel: str, judge: str, mode: str) -> str:
    return str(AccumulatorKey(panel, "judge", judge, mode))


def mode_key(panel: str, mode: str) -> str:
    return str(AccumulatorKey(panel, "mode", "all", mode))


def abstain_key(panel: str, kind: str, name: str) -> str:
    return str(AccumulatorKey(panel, "abstain", kind, name))


def stratum_copy(key: str, stratum_key: str) -> str:
    """The per-stratum copy of a four-part accumulator key (its fifth part)."""
    return f"{key}/{_q(stratum_key)}"


def _add(out: dict[str, dict[str, Number]], key: str, fields: Mapping[str, int]) -> None:
    row = out.setdefault(key, {})
    for field, delta in fields.items():
        row[field] = row.get(field, 0) + delta


def label_increments(record: VerdictRecord, label: Letter) -> dict[str, dict[str, Number]]:
    """The accumulator increments one label of one verdict adds (pure; see the module doc)."""
    verdict = record.verdict
    panel = record.panel
    stratum = label_stratum_key(record)
    out: dict[str, dict[str, Number]] = {}
    if verdict.choice is None:
        _add(out, abstain_key(panel, "method", verdict.method), {"n": 1})
    else:
        key = method_key(panel, verdict.method)
        fields = ACCUMULATOR.increments(verdict.confidence, verdict.choice == label)
        _add(out, key, fields)
        _add(out, stratum_copy(key, stratum), fields)
    for vote in verdict.votes:
        if vote.choice is None or vote.confidence is None:
            _add(out, abstain_key(panel, "judge", vote.judge), {"n": 1})
            continue
        fields = ACCUMULATOR.increments(vote.confidence, vote.choice == label)
        key = judge_key(panel, vote.judge, vote.mode)
        _add(out, key, fields)
        _add(out, stratum_copy(key, stratum), fields)
        _add(out, mode_key(panel, vote.mode), fields)
    return out


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def metrics_json(fields: Mapping[str, Any], *, n_bins: int, eps: float) -> dict[str, Any]:
    """Every metric of ``metrics_from_fields`` (NaN -> null) and the reliability bins."""
    metrics = ACCUMULATOR.metrics_from_fields(fields, n_bins=n_bins, eps=eps)
    reliability = metrics.pop("reliability")
    out = {key: _clean(value) for key, value in metrics.items()}
    out["n"] = int(metrics["n"])
    out["reliability"] = [b.as_dict() for b in reliability]
    return out


async def calibration_history(
    storage: Storage,
    tenant: str,
    storage_key: str,
    *,
    days: int,
    now: float,
    n_bins: int,
    eps: float,
) -> list[dict[str, Any]]:
    """ECE and TH-Score of one calibration key per day (UTC) over the last ``days`` days,
    oldest first, from the hour buckets: ``days`` reads of O(24 x fields) each, never a scan
    of labels. Days without labels have n = 0 and null metrics."""
    today = hour_of(now) // 24
    out = []
    for day in range(today - days + 1, today + 1):
        fields = await storage.read_accumulator(tenant, storage_key, since_hour=day * 24, until_hour=(day + 1) * 24)
        metrics = metrics_json(fields, n_bins=n_bins, eps=eps) if fields else None
        out.append({
            "day": time.strftime("%Y-%m-%d", time.gmtime(day * 86400)),
            "n": metrics["n"] if metrics else 0,
            "ece": metrics["ece"] if metrics else None,
            "th_score": metrics["th_score"] if metrics else None,
        })
    return out


async def calibration_report(
    storage: Storage,
    tenant: str,
    panel: str,
    *,
    window_hours: int | None,
    n_bins: int,
    eps: float,
    now: float,
    population: bool = True,
) -> list[dict[str, Any]]:
    """One entry per calibration key of (tenant, panel): all-time and window metrics of the
    labelled sample (``"sample": "labelled"``) and, for method and judge keys, the
    ``population`` block (:func:`judgefuse.service.estimates.population.population_block`) over the
    window (all time when there is none)."""
    from judgefuse.service.estimates.population import population_block

    prefix = _q(panel) + "/"
    keys = await storage.list_accumulators(tenant, prefix)
    since = hour_of(now) - window_hours + 1 if window_hours else None
    abstained: dict[tuple[str, str], dict[str, int]] = {}
    entries: list[tuple[AccumulatorKey, str]] = []
    for raw in keys:
        try:
            key = parse_key(raw)  # the per-stratum copies (five parts) are not listed
        except ValueError:
            continue
        if key.kind == "traffic":
            continue
        if key.kind == "abstain":
            total = await storage.read_accumulator(tenant, raw)
            win = (
                await storage.read_accumulator(tenant, raw, since_hour=since)
                if since is not None else total
            )
            abstained[(key.name, key.mode)] = {
                "all_time": int(total.get("n", 0)),
                "window": int(win.get("n", 0)),
            }
        else:
            entries.append((key, raw))
    out = []
    for key, raw in entries:
        total = await storage.read_accumulator(tenant, raw)
        entry: dict[str, Any] = {
            "key": f"{key.kind}:{key.name}:{key.mode}",
            "storage_key": raw,
            "panel": key.panel,
            "kind": key.kind,
            "name": key.name,
            "mode": key.mode,
            "sample": "labelled",
            "all_time": metrics_json(total, n_bins=n_bins, eps=eps),
        }
        if since is not None:
            window = await storage.read_accumulator(tenant, raw, since_hour=since)
            entry["window"] = metrics_json(window, n_bins=n_bins, eps=eps)
        else:
            entry["window"] = None
        entry["abstained"] = (
            abstained.get((key.kind, key.name), {"all_time": 0, "window": 0})
            if key.kind in ("method", "judge") else None
        )
        entry["population"] = (
            await population_block(storage, tenant, key, raw, since_hour=since, n_bins=n_bins,
                                   eps=eps)
            if population else None
        )
        out.append(entry)
    # judges that only ever abstained still deserve a line
    seen = {(e["kind"], e["name"]) for e in out}
    for (kind, name), counts in sorted(abstained.items()):
        if (kind, name) not in seen:
            out.append({
                "key": f"{kind}:{name}:-", "storage_key": None, "panel": panel, "kind": kind,
                "name": name, "mode": None, "sample": "labelled", "all_time": None, "window": None,
                "abstained": counts, "population": None,
            })
    return out
