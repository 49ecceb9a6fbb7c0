"""The replica that served the page: its event loop's lag and its 429s since it started.

Everything else on the overview is read from the store, so every replica shows the same figures.
These two are not in the store: each replica has its own event loop and its own admission, and
an operator who sees latency rise needs to know whether this process's loop is behind
(docs/design.md, 'Scale'). They come from the same Prometheus series ``/metrics`` exports:

* ``judgefuse_event_loop_lag_seconds``: how late a timer set 5 ms ahead fired, sampled every
  5 ms since the start. A histogram keeps bucket counts, not samples, so a quantile is given as
  the upper bound of the bucket it falls in ("p99 ≤ 2 ms"), which is what the histogram can
  say and what ``histogram_quantile`` would bound it by;
* ``judgefuse_admission_rejected_total``: requests refused with 429 by limit, for the tenants
  the viewer may see and for requests refused before authentication (tenant ``-``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["LAG_QUANTILES", "bound_text", "bucket_quantile", "replica_figures"]

LAG_QUANTILES = (0.5, 0.99, 0.999)
PRE_AUTH_TENANT = "-"
"""The tenant label of requests refused before the caller was known (backpressure)."""


def bucket_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The upper bound of the bucket holding quantile ``q``, from cumulative ``(le, count)``
    pairs sorted by ``le`` (the last is ``+Inf``): the smallest ``le`` whose count reaches
    ``q`` of the total. ``None`` when there is no observation; ``inf`` when the quantile is
    past the largest finite bucket."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    need = q * buckets[-1][1]
    for le, count in buckets:
        if count >= need:
            return le
    return math.inf  # pragma: no cover - the +Inf bucket holds every observation


def _histogram_buckets(histogram: Any) -> tuple[list[tuple[float, float]], float, float]:
    """(cumulative buckets, count, sum) of an unlabelled prometheus_client Histogram."""
    buckets: list[tuple[float, float]] = []
    count = total = 0.0
    for metric in histogram.collect():
        for sample in metric.samples:
            if sample.name.endswith("_bucket"):
                buckets.append((float(sample.labels["le"]), float(sample.value)))
            elif sample.name.endswith("_count"):
                count = float(sample.value)
            elif sample.name.endswith("_sum"):
                total = float(sample.value)
    buckets.sort()
    return buckets, count, total


def _rejections(counter: Any, tenants: Iterable[str] | None) -> dict[str, int]:
    """429s by limit, for ``tenants`` (None: every tenant) and the pre-authentication ones."""
    seen = None if tenants is None else {*tenants, PRE_AUTH_TENANT}
    out: dict[str, int] = {}
    for metric in counter.collect():
        for sample in metric.samples:
            if not sample.name.endswith("_total"):
                continue
            if seen is not None and sample.labels.get("tenant") not in seen:
                continue
            limit = sample.labels.get("limit", "?")
            out[limit] = out.get(limit, 0) + int(sample.value)
    return dict(sorted(out.items()))


def bound_text(seconds: float | None) -> str:
    """A quantile's bucket bound for people: ``≤ 2 ms``, or ``> 5000 ms`` past the last bucket."""
    if seconds is None:
        return "–"
    if math.isinf(seconds):
        return "> 5000 ms"
    return f"≤ {seconds * 1000.0:g} ms"


def replica_figures(metrics: Any, tenants: Iterable[str] | None) -> dict[str, Any]:
    """The loop lag (samples; ``lag`` p50/p99/p999 as bucket bounds in words; mean and worst in ms) and the 429s by limit
    (for ``tenants``; None: all) of this process, read from ``metrics`` (the app's Metrics)."""
    buckets, count, total = _histogram_buckets(metrics.loop_lag_seconds)
    quantiles = {q: bucket_quantile(buckets, q) for q in LAG_QUANTILES}
    rejected = _rejections(metrics.admission_rejected, tenants)
    return {
        "lag_samples": int(count),
        "lag": {f"p{q * 100:g}".replace(".", ""): bound_text(v) for q, v in quantiles.items()},
        "lag_mean_ms": (total / count * 1000.0) if count else None,
        "lag_worst_ms": metrics.loop_lag.worst_s * 1000.0 if count else None,
        "rejected": rejected,
        "rejected_total": sum(rejected.values()),
    }
