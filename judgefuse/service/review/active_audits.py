"""Active audits: an auto-accepted verdict audited at its confidence band's rate (a
panel's ``audit_sampling: active``, opt-in).

Uniform audits draw every auto-accepted verdict at the audit rate in force. Active audits cut the
panel's recent auto-accepted confidences into bands and give each band a Neyman rate,
``plan_audit_bands`` of :mod:`judgefuse.calibration.audit_bands`: rates proportional to each
band's spread of correctness, averaging the audit rate in force over the reference traffic,
floored at :data:`FLOOR_SHARE` of it. The plan is made from the newest :data:`REFERENCE`
auto-accepted verdicts of the panel (their fused confidences, and the audit labels among them)
and kept for ``review.audit_plan_ttl_s``; with fewer than :data:`MIN_REFERENCE` of them audits
stay uniform.

A verdict is stamped with its band's rate as its audit rate and, when drawn, as its inclusion
probability (:func:`.sampling.stamp_review`), so the ledger counts it in the stratum
``auto@{rate}`` of its band: each band is a stratum of equal-probability sampling and every
stratified estimate (population accuracy, Brier, auto-accept precision, the stratified tuner)
stays unbiased whatever the bands, with no change. Two things are not stratified and assume a
uniform sample of the auto-accepted verdicts: the precision monitor's confidence sequence, and
the tuner's pooling by inclusion probability. So one draw ``u`` decides both: ``u < floor``
(every band's rate is at least the floor) is an ordinary ``audit`` (a uniform sample at the
floor rate, which the monitor and the pooled tuner may use as before), ``floor <= u < rate`` an
``audit_band`` audit (queued and labelled alike, counted in its band's stratum, left out of the
monitor; any such label makes a tune take the stratified bound).

Measured before it was offered (``benchmarks/bench_active_audits.py``): at equal expected labels
the intervals were 0.92-1.02 as wide as uniform audits' on the shared pools, so it is not the
default. They cover: over 1,000 resampled streams per pool replayed through this plan,
:func:`.sampling.stamp_review` and the population estimates (``benchmarks/bench_active_audit_coverage.py``),
the 95% intervals of auto-accept precision, accuracy and Brier covered 0.947-0.971.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass

import numpy as np

from judgefuse.calibration.audit_bands import AuditBands, plan_audit_bands
from judgefuse.judges.types import LETTERS
from judgefuse.service.ledger import UNSOLICITED, label_stratum_key
from judgefuse.service.settings import Settings
from judgefuse.service.storage import VerdictStore
from judgefuse.service.storage.verdict_query import VerdictQuery

__all__ = ["FLOOR_SHARE", "MIN_REFERENCE", "REFERENCE", "ActiveAudits", "BandedRate"]

REFERENCE = 1000
"""The newest auto-accepted verdicts a plan is made from."""
MIN_REFERENCE = 100
"""Fewer auto-accepted verdicts than this: no bands, audits stay uniform."""
BANDS = 3
FLOOR_SHARE = 0.5
"""Every band's rate is at least this share of the audit rate in force."""


@dataclass(frozen=True)
class BandedRate:
    """The bands in force and the floor below which a draw is an ordinary (uniform) audit."""

    bands: AuditBands
    floor: float

    def rate(self, confidence: float) -> float:
        return self.bands.rate(confidence)


class ActiveAudits:
    """Per (tenant, panel, audit rate): the bands in force, planned from the panel's newest
    auto-accepted verdicts and kept ``review.audit_plan_ttl_s`` (module docstring)."""

    def __init__(self, settings: Settings, storage: VerdictStore) -> None:
        self.settings = settings
        self.storage = storage
        self._plans: dict[tuple[str, str, float], tuple[BandedRate | None, float]] = {}
        self._pending: dict[tuple[str, str, float], asyncio.Task[BandedRate | None]] = {}

    async def bands(self, tenant: str, panel: str, mean_rate: float) -> BandedRate | None:
        """The bands for audits averaging ``mean_rate``; None: audit uniformly (no rate, or too
        little auto-accepted traffic to plan from). Verdicts arriving while a plan is read share
        that read."""
        if not 0.0 < mean_rate < 1.0:
            return None
        key = (tenant, panel, mean_rate)
        hit = self._plans.get(key)
        if hit is not None and time.monotonic() - hit[1] <= self.settings.review.audit_plan_ttl_s:
            return hit[0]
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(self._plan(key))
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settled(key, done))
        return await asyncio.shield(task)

    def _settled(self, key: tuple[str, str, float], task: asyncio.Future[BandedRate | None]) -> None:
        if self._pending.get(key) is task:
            del self._pending[key]
        if not task.cancelled():
            task.exception()  # retrieved: every verdict that shared it was answered with it

    async def _plan(self, key: tuple[str, str, float]) -> BandedRate | None:
        tenant, panel, mean_rate = key
        page = await self.storage.list_verdicts(
            tenant, VerdictQuery(panel=panel, route="auto_accept"), limit=REFERENCE, scan_limit=REFERENCE
        )
        planned: BandedRate | None = None
        if len(page.records) >= MIN_REFERENCE:
            confidence = np.array([r.verdict.confidence for r in page.records])
            correct = np.array([
                float(r.label == r.verdict.choice)
                if r.label in LETTERS and label_stratum_key(r) != UNSOLICITED else math.nan
                for r in page.records
            ])  # fmt: skip
            bands = plan_audit_bands(confidence, correct, mean_rate=mean_rate, bands=BANDS, floor_share=FLOOR_SHARE)
            if len(bands.rates) > 1:  # one band (one distinct confidence) is uniform
                planned = BandedRate(bands, min((*bands.rates, FLOOR_SHARE * mean_rate)))
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[key] = (planned, time.monotonic())
        return planned
