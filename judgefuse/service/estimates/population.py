"""Population estimates of a calibration key: what the labels say about *all* traffic.

The labelled sample is not a sample of the traffic: it is everything routed to review plus a
random ``audit_rate`` share of what was auto-accepted (docs/design.md, 'The review loop'). Each
stratum's labels are a random sample of that stratum (the queue is served in random order), so
the stratified estimator ``sum_s (N_s / N) * mean_s(x)`` is unbiased for the traffic, while
the plain mean over labels over-weights the hard, reviewed verdicts.

Inputs, all counters (a read is O(strata x hours x bins), never O(labels)):

* N_s: the traffic counters ``{panel}/traffic/{method}/{stratum}`` of the window (a judge or a
  mode key uses the panel's total, method ``*``), read by :func:`judgefuse.service.ledger.traffic_counts`;
* the labels of stratum s: the per-stratum copy ``{key}/{stratum}`` of the calibration key.

Both are named by the ledger grammar (:mod:`judgefuse.service.ledger`).

Strata: ``review`` and one ``auto@{rate}`` per audit rate that was in force (its N counts every
auto-accepted verdict at that rate, its labels are the audit labels only). Unsolicited labels
(verdicts never queued) are reported apart and never enter the estimates. The estimators and
their intervals are :mod:`judgefuse.calibration.stratified`'s; auto-accept precision is the
accuracy over the ``auto@`` strata alone.

Beside those labels-only estimates, a method key carries ``model_assisted``: accuracy, Brier and
auto-accept precision by :mod:`judgefuse.calibration.model_assisted`'s difference estimator,
which adds every verdict's fused confidence (the ``pn``/``pc``/``pq`` prediction sums its
traffic counter holds, :func:`judgefuse.service.ledger.prediction_fields`) to the same labels.
Its population is the window's decided verdicts (an undecided one has no confidence to
predict with). There is no model-assisted ECE (see that module), and none for judge keys (the
counters hold the fused confidence, not the judge's). ``None`` when the counters of the window
carry no prediction sums (verdicts stored before them).

The estimators cost a few ms per key (seeded bootstrap intervals for ECE and TH), so results
are memoised per process on their exact inputs (every N_s and every label field): a dashboard
or API poll with no new verdict or label in the window reuses them, anything new recomputes.
"""

from __future__ import annotations

import copy
import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from judgefuse.service.ledger import (
    ACCUMULATOR,
    ALL_METHODS,
    REVIEW,
    UNSOLICITED,
    AccumulatorKey,
    accepted_stratum,
    stratum_copy,
    traffic_counts,
    traffic_predictions,
)
from judgefuse.service.storage import LabelLedger

__all__ = ["label_count", "population_block"]

_MEMO: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_MEMO_SIZE = 512


def label_count(fields: Mapping[str, Any]) -> int:
    """How many labels an accumulator record holds (the sum of its per-bin counts)."""
    return int(sum(v for k, v in fields.items() if k[:1] == "n" and k[1:].isdigit()))


def _interval(interval: Any) -> dict[str, Any]:
    data = interval.as_dict() if hasattr(interval, "as_dict") else dict(interval)
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in data.items()}


def _model_assisted(strata: list[Any], predictions: Mapping[str, tuple[int, float, float]],
                    level: float) -> dict[str, Any] | None:
    """The ``model_assisted`` block (module docstring) of the strata that have prediction sums."""
    from judgefuse.calibration.model_assisted import PredictionTotals, assisted_from_bins, difference_mean
    from judgefuse.calibration.stratified_data import parse_strata

    totals = {name: PredictionTotals(*values) for name, values in predictions.items()}
    parsed = parse_strata(strata, ACCUMULATOR, ACCUMULATOR.th_eps[0])
    if not totals or any(s.name not in totals for s in parsed):
        return None  # a stratum without prediction sums: the estimate would not cover it
    assisted = assisted_from_bins(parsed, totals)
    auto = [s for s in assisted["accuracy"] if accepted_stratum(s.name)]
    return {
        "accuracy": _interval(difference_mean(assisted["accuracy"], level=level, method="accuracy")),
        "brier": _interval(difference_mean(assisted["brier"], level=level, method="brier")),
        "auto_accept_precision": (
            _interval(difference_mean(auto, level=level, method="auto-accept precision")) if auto else None),
        "ece": None,
        "window_decided": sum(s.population for s in assisted["accuracy"]),
    }


async def population_block(
    storage: LabelLedger,
    tenant: str,
    key: AccumulatorKey,
    storage_key: str,
    *,
    since_hour: int | None,
    n_bins: int,
    eps: float,
    level: float = 0.95,
) -> dict[str, Any] | None:
    """The ``population`` block of one method or judge key (None for other kinds)."""
    from judgefuse.calibration.stratified import (
        StratumData,
        population_estimates,
        precision_estimate,
    )

    if key.kind not in ("method", "judge"):
        return None
    method = key.name if key.kind == "method" else ALL_METHODS
    traffic = await traffic_counts(storage, tenant, key.panel, method, since_hour=since_hour)
    fields = {
        stratum: await storage.read_accumulator(
            tenant, stratum_copy(storage_key, stratum), since_hour=since_hour
        )
        for stratum in [*traffic, UNSOLICITED]
    }
    labelled = {stratum: label_count(f) for stratum, f in fields.items()}
    # a stratum older than its counters (labels of records from before the review loop) is at
    # least as large as its labelled part
    sizes = {s: max(n, labelled.get(s, 0)) for s, n in traffic.items()}
    if labelled.get(REVIEW) and REVIEW not in sizes:
        sizes[REVIEW] = labelled[REVIEW]
    total = sum(sizes.values())
    strata = [StratumData(s, n, fields.get(s, {})) for s, n in sorted(sizes.items())]
    block: dict[str, Any] = {
        "window_verdicts": total,
        "labelled": {s: labelled.get(s, 0) for s in sorted(sizes)},
        "represented": {s: (n / total if total else None) for s, n in sorted(sizes.items())},
        "unsolicited": {"labelled": labelled.get(UNSOLICITED, 0), "in_estimates": False},
    }
    predictions = (await traffic_predictions(storage, tenant, key.panel, method, since_hour=since_hour)
                   if key.kind == "method" else {})
    memo_key = (n_bins, eps, level, tuple(sorted(predictions.items())), tuple(
        (st.name, st.population, tuple(sorted(st.fields.items()))) for st in strata))
    estimated = _MEMO.get(memo_key)
    if estimated is None:
        estimates = population_estimates(strata, accumulator=ACCUMULATOR, n_bins=n_bins, eps=eps,
                                         level=level) if total else {}
        estimated = {name: _interval(estimates[name]) if name in estimates else None
                     for name in ("accuracy", "ece", "brier", "th_score")}
        auto = [st for st in strata if accepted_stratum(st.name)]
        estimated["auto_accept_precision"] = (
            _interval(precision_estimate(auto, level=level)) if auto else None
        )
        estimated["model_assisted"] = _model_assisted(strata, predictions, level) if total else None
        _MEMO[memo_key] = estimated
        if len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    else:
        _MEMO.move_to_end(memo_key)
    block.update(copy.deepcopy(estimated))
    block["n_labels"] = sum(labelled.get(s, 0) for s in sizes)
    block["level"] = level
    return block
