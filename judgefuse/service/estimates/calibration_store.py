"""How the service reads the calibration accumulators: per-key metrics, history, the report.

The keys, what a label adds to them and the traffic counters beside them are the ledger
grammar (:mod:`judgefuse.service.ledger`); this module turns what storage holds under those
keys into ``GET /v1/calibration``'s entries, the dashboard's per-day history and ``/metrics``'s
gauges. Each entry is the labelled sample's metrics (all time and over the window) plus, for a
method or judge key, the population block (:mod:`judgefuse.service.estimates.population`), which
reads the key's stratum copies and the traffic counters (never reported as keys themselves).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

from judgefuse.service.estimates.agreement import agreement_block, tie_count
from judgefuse.service.estimates.population import population_block
from judgefuse.service.ledger import ACCUMULATOR, AccumulatorKey, panel_prefix, parse_key
from judgefuse.service.storage import LabelLedger, hour_of

__all__ = ["calibration_history", "calibration_report", "metrics_json"]


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
    storage: LabelLedger,
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
    storage: LabelLedger,
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
    prefix = panel_prefix(panel)
    keys = await storage.list_accumulators(tenant, prefix)
    since = hour_of(now) - window_hours + 1 if window_hours else None
    abstained: dict[tuple[str, str], dict[str, int]] = {}
    agreed: dict[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]] = {}
    entries: list[tuple[AccumulatorKey, str]] = []
    for raw in keys:
        try:
            key = parse_key(raw)  # the per-stratum copies (five parts) are not listed
        except ValueError:
            continue
        if key.kind == "traffic":
            continue
        if key.kind in ("abstain", "agreement"):
            total = await storage.read_accumulator(tenant, raw)
            win = (
                await storage.read_accumulator(tenant, raw, since_hour=since)
                if since is not None else total
            )
            if key.kind == "abstain":
                abstained[(key.name, key.mode)] = {
                    "all_time": int(total.get("n", 0)),
                    "window": int(win.get("n", 0)),
                }
            else:
                agreed[(key.name, key.mode)] = (total, win)
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
        entry.update(_agreement_entry(agreed, key.kind, key.name, windowed=since is not None))
        entry["population"] = (
            await population_block(storage, tenant, key, raw, since_hour=since, n_bins=n_bins,
                                   eps=eps)
            if population else None
        )
        out.append(entry)
    # judges that only ever abstained or tied still deserve a line
    seen = {(e["kind"], e["name"]) for e in out}
    for kind, name in sorted(set(abstained) | set(agreed)):
        if (kind, name) not in seen:
            out.append({
                "key": f"{kind}:{name}:-", "storage_key": None, "panel": panel, "kind": kind,
                "name": name, "mode": None, "sample": "labelled", "all_time": None, "window": None,
                "abstained": abstained.get((kind, name), {"all_time": 0, "window": 0}),
                "population": None,
                **_agreement_entry(agreed, kind, name, windowed=since is not None),
            })
    return out


def _agreement_entry(
    agreed: Mapping[tuple[str, str], tuple[dict[str, Any], dict[str, Any]]],
    kind: str,
    name: str,
    *,
    windowed: bool,
) -> dict[str, Any]:
    """``ties`` (counted like ``abstained``) and ``agreement`` of a method or judge entry from
    its agreement counter (zero without one: a counter from before them); None for a mode key."""
    if kind not in ("method", "judge"):
        return {"ties": None, "agreement": None}
    total, window = agreed.get((kind, name), ({}, {}))
    return {
        "ties": {"all_time": tie_count(total), "window": tie_count(window)},
        "agreement": {
            "all_time": agreement_block(total),
            "window": agreement_block(window) if windowed else None,
        },
    }
