"""Win rate of system X over system Y among a panel's stored verdicts, corrected by the labels
(``GET /v1/panels/{panel}/winrate``; docs/design.md, 'Win rates' and 'The review loop').

Each request names its two systems in item metadata: answer A's in ``{field}_a``, answer B's in
``{field}_b`` (``field`` defaults to ``system``, as ``judgefuse winrate``'s ``system_a`` /
``system_b``). Every stored verdict comparing X with Y, in either order, counts: its judges'
outcome is 1 when the fused verdict picks X's answer, 0 for Y's, 1/2 when undecided; a label's
outcome is 1 / 0 by the label, 1/2 for a tie or both-bad label.

The labels are not a uniform sample of the verdicts: everything routed to review is queued, an
auto-accepted verdict only when drawn for audit. Within its stratum (``review``, ``auto@{rate}``,
``inline@...``) each labelled verdict is a random one (the queue is served in random order),
so the corrected estimate is the stratified difference estimator of
:func:`judgefuse.calibration.model_assisted.difference_mean` with the judges' outcome as the
prediction and the labels as the correction (the PPI estimate of ``judgefuse winrate``, per
stratum). Beside it: the judge-only mean (normal interval; it inherits the judges' bias) and
the labels-only stratified mean (the same estimator with ``lam = 0``). Unsolicited labels
(verdicts never queued) and records from before the review loop (no stamp) count in the
judge-only estimate only. A stratum with comparisons but no label makes the corrected and
labels-only estimates undefined (NaN -> ``null``) with an interval as wide as its share allows.

Cost: one scan of the panel's stored records in the window (``Storage.iter_records``), so this
is a report, not a dashboard poll; items must be stored (``store_items``) for their metadata.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel

from judgefuse.service.ledger import UNSOLICITED, label_stratum_key, population_stratum_key
from judgefuse.service.storage import Storage, VerdictRecord

__all__ = ["WinRateEstimate", "WinRateOut", "panel_win_rate"]


class WinRateEstimate(BaseModel):
    """One estimate of the win rate with its interval (``null``: nothing to estimate from, or
    a stratum with comparisons and no label) and the labels behind it."""

    estimate: float | None
    lower: float | None
    upper: float | None
    labels: int
    method: str


class WinRateOut(BaseModel):
    """``GET /v1/panels/{panel}/winrate``: the three estimates side by side."""

    panel: str
    field: str
    x: str
    y: str
    level: float
    n_verdicts: int
    """Stored verdicts comparing X with Y in the window."""
    n_labels: int
    """Labels in the corrected and labels-only estimates (unsolicited ones left out)."""
    labelled: dict[str, int]
    """Labels per review stratum."""
    represented: dict[str, int]
    """Comparisons per review stratum."""
    unsolicited_labels: int
    corrected: WinRateEstimate
    labels_only: WinRateEstimate
    judge_only: WinRateEstimate


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def _systems(record: VerdictRecord, field: str) -> tuple[str, str] | None:
    meta = record.item.metadata if record.item is not None else {}
    a, b = meta.get(f"{field}_a"), meta.get(f"{field}_b")
    if a is None or b is None:
        return None
    return str(a), str(b)


async def panel_win_rate(
    storage: Storage, tenant: str, panel: str, *, field: str, x: str, y: str,
    since: float | None, level: float,
) -> WinRateOut:
    """The ``WinRateOut`` body (module docstring) of (tenant, panel)'s records since ``since``."""
    from judgefuse.calibration.model_assisted import AssistedStratum, difference_mean
    from judgefuse.calibration.win_rate import clt_mean, outcome_for_x

    judged: list[float] = []
    strata: dict[str, dict[str, list[float]]] = {}
    unsolicited = 0
    await storage.index_existing_records()
    async for record in storage.iter_records(tenant, panel=panel, since=since):
        systems = _systems(record, field)
        if systems is None or {systems[0], systems[1]} != {x, y}:
            continue
        f = outcome_for_x(record.verdict.choice, systems[0], x)
        judged.append(f)
        if record.review is None:
            unsolicited += record.label is not None
            continue
        part = strata.setdefault(population_stratum_key(record.review), {"f": [], "fl": [], "yl": []})
        part["f"].append(f)
        if record.label is None:
            continue
        if label_stratum_key(record) == UNSOLICITED:
            unsolicited += 1
            continue
        part["fl"].append(f)
        part["yl"].append(outcome_for_x(record.label, systems[0], x))
    assisted = [AssistedStratum(name, len(p["f"]), float(sum(p["f"])), np.asarray(p["yl"]), np.asarray(p["fl"]),
                                np.ones(len(p["yl"]))) for name, p in sorted(strata.items())]
    corrected = difference_mean(assisted, level=level, method="win rate corrected by the labels")
    labels_only = difference_mean(assisted, level=level, lam=0.0, method="win rate from the labels only")
    judge_only = clt_mean(judged, alpha=1.0 - level, method="judge verdicts only (normal interval)")
    judge = {"estimate": judge_only.estimate, "lower": judge_only.lower, "upper": judge_only.upper,
             "labels": 0, "method": judge_only.method}
    return WinRateOut.model_validate({
        "panel": panel, "field": field, "x": x, "y": y, "level": level,
        "n_verdicts": len(judged),
        "n_labels": corrected.labels,
        "labelled": {name: len(p["yl"]) for name, p in sorted(strata.items())},
        "represented": {name: len(p["f"]) for name, p in sorted(strata.items())},
        "unsolicited_labels": unsolicited,
        "corrected": corrected.as_dict(),
        "labels_only": labels_only.as_dict(),
        "judge_only": _clean(judge),
    })
