"""The audit rate of new verdicts when a panel has a ``label_budget_per_day``.

Without a budget the rate is the panel's static ``audit_rate``. With one, the rate comes from
:func:`~judgefuse.calibration.label_budget.plan_audit_rate` given the last 24 hours' traffic per
stratum, read from the traffic counters (``{panel}/traffic/*/review`` and every
``{panel}/traffic/*/auto@{rate}``: 24 hour buckets each). Reading them on every verdict would put
a dozen storage reads on the hot path, so a replica keeps its plan for
``settings.review.audit_plan_ttl_s``. Before any auto-accepted traffic (nothing to plan from) the
static ``audit_rate`` serves. Stored verdicts keep the rate stamped when they were decided: a
new plan never rewrites an inclusion probability.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass
from typing import Any

from judgefuse.calibration.label_budget import (
    AuditPlan,
    expected_detection_delay,
    expected_half_width,
    plan_audit_rate,
)
from judgefuse.service.ledger import ALL_METHODS, REVIEW, rate_of, traffic_prefix, traffic_stratum
from judgefuse.service.settings import Settings
from judgefuse.service.storage import LabelLedger, hour_of

__all__ = ["AuditPlanner", "PlannedRate", "daily_traffic", "plan_report"]

DAY_HOURS = 24


@dataclass(frozen=True)
class PlannedRate:
    """The audit rate for new verdicts and where it came from."""

    audit_rate: float
    source: str
    """``audit_rate`` (the panel's static rate) or ``label_budget_per_day``."""
    plan: AuditPlan | None = None
    review_per_day: float = 0.0
    auto_per_day: float = 0.0


async def daily_traffic(storage: LabelLedger, tenant: str, panel: str, now: float) -> tuple[float, float]:
    """(review, auto-accepted) verdicts of (tenant, panel) in the 24 hours before ``now``."""
    prefix = traffic_prefix(panel, ALL_METHODS)
    since = hour_of(now) - DAY_HOURS + 1
    review = auto = 0.0
    for key in await storage.list_accumulators(tenant, prefix):
        stratum = traffic_stratum(prefix, key)
        if stratum != REVIEW and rate_of(stratum) is None:
            continue
        n = float((await storage.read_accumulator(tenant, key, since_hour=since)).get("n", 0))
        if stratum == REVIEW:
            review += n
        else:
            auto += n
    return review, auto


class AuditPlanner:
    """Per (tenant, panel): the audit rate for new verdicts, cached ``audit_plan_ttl_s``."""

    def __init__(self, settings: Settings, storage: LabelLedger) -> None:
        self.settings = settings
        self.storage = storage
        self._plans: dict[tuple[str, str], tuple[PlannedRate, float]] = {}

    async def rate(self, tenant: str, panel: str, config: Any, now: float) -> PlannedRate:
        budget = getattr(config, "label_budget_per_day", None)
        if budget is None:
            return PlannedRate(config.audit_rate, "audit_rate")
        key = (tenant, panel)
        hit = self._plans.get(key)
        if hit is not None and time.monotonic() - hit[1] <= self.settings.review.audit_plan_ttl_s:
            return hit[0]
        review, auto = await daily_traffic(self.storage, tenant, panel, now)
        if auto <= 0:
            planned = PlannedRate(config.audit_rate, "audit_rate", None, review, auto)
        else:
            plan = plan_audit_rate(budget, review, auto)
            planned = PlannedRate(plan.audit_rate, "label_budget_per_day", plan, review, auto)
        self._plans[key] = (planned, time.monotonic())
        return planned


@functools.lru_cache(maxsize=256)
def drop_delay_labels(target: float, before: float, alpha: float) -> float:
    """Audit labels the monitor needs to see a 10-point drop from ``before`` (the boundary
    along the expected path). It does not depend on the audit rate (verdicts = labels / rate),
    and takes ~0.5 s, so it is computed once per (target, before, alpha) per process, off the
    event loop."""
    return expected_detection_delay(0.1, 1.0, target=target, precision_before=before, drop=0.10,
                                    alpha=alpha, method="path").labels


async def plan_report(planned: PlannedRate, *, target: float | None, alpha: float,
                budget: float | None) -> dict[str, Any]:
    """``/v1/review/stats``' ``plan`` block: the rate, the plan, the expected half-width of the
    auto-accept precision interval after a day, and the expected time to detect a 10-point drop
    (the monitor's boundary along the expected path: deterministic, milliseconds)."""
    out: dict[str, Any] = {
        "audit_rate": planned.audit_rate, "source": planned.source,
        "label_budget_per_day": budget, "review_per_day": planned.review_per_day,
        "auto_per_day": planned.auto_per_day, "plan": None, "expected_half_width": None,
        "detection_delay_10_points": None,
    }
    if planned.plan is not None:
        p = planned.plan
        out["plan"] = {"audit_rate": p.audit_rate, "review_rate": p.review_rate,
                       "audit_labels_per_day": p.audit_labels_per_day,
                       "review_labels_per_day": p.review_labels_per_day,
                       "labels_per_day": p.labels_per_day, "binding": p.binding, "method": p.method}
    if planned.auto_per_day > 0 and planned.audit_rate > 0:
        hw = expected_half_width(planned.review_per_day, planned.auto_per_day, planned.audit_rate)
        out["expected_half_width"] = {"population": _num(hw.population),
                                      "auto_accept": _num(hw.auto_accept), "days": 1}
        if target is not None and 0.0 < target < 1.0:
            # a drop from 5 points above the target to 5 below (0.90 -> 0.80 at target 0.85)
            before = min(0.99, target + 0.05)
            labels = await asyncio.to_thread(drop_delay_labels, target, before, alpha)
            out["detection_delay_10_points"] = {
                "precision_before": before, "precision_after": before - 0.10,
                "labels": _num(labels), "verdicts": _num(labels / planned.audit_rate),
                "days": _num(labels / (planned.audit_rate * planned.auto_per_day)),
                "method": "path"}
    return out


def _num(x: float) -> float | None:
    return None if x != x or x in (float("inf"), float("-inf")) else float(x)
