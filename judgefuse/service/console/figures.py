"""The console's figures that no API computes yet, read from the store so every replica agrees.

* **Routing** per hour and per window, from the ledger's traffic counters (docs/design.md,
  'Population estimates'): every stored verdict adds ``n = 1`` to its panel's counter of its
  stratum in its hour bucket, so the routing rate of any window is a read of O(hours x strata)
  counters, and the first day already shows its hours.
* **Judges** (latency, cost, failures) over the panel's newest stored verdicts
  (``Storage.iter_recent``): the votes carry their own latency, calls and cost
  (docs/design.md, 'Cost accounting'), so no per-process tally is needed.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

from judgefuse.service.ledger import (
    ALL_METHODS,
    INLINE_AUTO,
    INLINE_REVIEW,
    REVIEW,
    accepted_stratum,
    is_population_stratum,
    traffic_prefix,
    traffic_stratum,
)
from judgefuse.service.storage import LabelLedger, VerdictStore, hour_of

__all__ = ["HourRouting", "JudgeFigures", "Routing", "judge_figures", "routing"]


@dataclass
class HourRouting:
    """Verdicts of one UTC hour by route (inline verdicts count in their route)."""

    hour: int
    auto_accept: int = 0
    human_review: int = 0

    @property
    def total(self) -> int:
        return self.auto_accept + self.human_review

    @property
    def label(self) -> str:
        return time.strftime("%m-%d %H:00", time.gmtime(self.hour * 3600))


@dataclass
class Routing:
    """Routing of a panel: all time, over the window, and the window's hours (oldest first)."""

    window_hours: int
    all_time: HourRouting
    window: HourRouting
    hours: list[HourRouting] = field(default_factory=list)
    inline: int = 0
    """Verdicts of the window whose request carried its label (in the route counts too)."""

    @staticmethod
    def rate(counts: HourRouting) -> float | None:
        return counts.auto_accept / counts.total if counts.total else None


def _route_of(stratum: str) -> str | None:
    if accepted_stratum(stratum):
        return "auto_accept"
    if stratum in (REVIEW, INLINE_REVIEW):
        return "human_review"
    return None


def _add(counts: HourRouting, route: str, n: int) -> None:
    setattr(counts, route, getattr(counts, route) + n)


async def routing(storage: LabelLedger, tenant: str, panel: str, *, now: float, window_hours: int) -> Routing:
    """The panel's routing from its traffic counters (every method: the ``*`` counters)."""
    prefix = traffic_prefix(panel, ALL_METHODS)
    current = hour_of(now)
    first = current - window_hours + 1
    out = Routing(window_hours, HourRouting(-1), HourRouting(first),
                  [HourRouting(h) for h in range(first, current + 1)])
    for raw in await storage.list_accumulators(tenant, prefix):
        stratum = traffic_stratum(prefix, raw)
        route = _route_of(stratum) if is_population_stratum(stratum) else None
        if route is None:
            continue
        _add(out.all_time, route, int((await storage.read_accumulator(tenant, raw)).get("n", 0)))
        for bucket in out.hours:
            fields = await storage.read_accumulator(
                tenant, raw, since_hour=bucket.hour, until_hour=bucket.hour + 1)
            n = int(fields.get("n", 0))
            _add(bucket, route, n)
            _add(out.window, route, n)
            if stratum in (INLINE_AUTO, INLINE_REVIEW):
                out.inline += n
    return out


@dataclass
class JudgeFigures:
    """One judge's votes over the sampled verdicts."""

    judge: str
    votes: int = 0
    invalid: int = 0
    """Votes without an answer (failed or abstained; a tie vote is an answer)."""
    ties: int = 0
    calls: int = 0
    cost_usd: float = 0.0
    latencies: list[float] = field(default_factory=list)

    def latency(self, q: float) -> float | None:
        """The ``q`` quantile of the latencies (nearest rank), None without votes."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]

    def as_row(self) -> dict[str, Any]:
        return {
            "judge": self.judge, "votes": self.votes, "invalid": self.invalid, "ties": self.ties,
            "invalid_share": self.invalid / self.votes if self.votes else None,
            "latency_p50": self.latency(0.5), "latency_p95": self.latency(0.95),
            "calls": self.calls, "cost_usd": self.cost_usd,
            "cost_per_vote": self.cost_usd / self.votes if self.votes else None,
        }


async def judge_figures(
    storage: VerdictStore, tenant: str, panel: str, judges: list[str], *, sample: int
) -> tuple[int, list[dict[str, Any]]]:
    """(verdicts read, one row per judge) over the panel's newest ``sample`` stored verdicts;
    a judge of the panel that cast no vote there still has its (empty) row."""
    try:
        records = await storage.iter_recent(tenant, panel, limit=sample)
    except NotImplementedError:
        records = []
    figures = {name: JudgeFigures(name) for name in judges}
    for record in records:
        for vote in record.verdict.votes:
            row = figures.setdefault(vote.judge, JudgeFigures(vote.judge))
            row.votes += 1
            row.invalid += vote.failed
            row.ties += vote.tie
            row.calls += vote.calls
            row.cost_usd += vote.cost_usd
            row.latencies.append(vote.latency_s)
    return len(records), [row.as_row() for row in figures.values()]
