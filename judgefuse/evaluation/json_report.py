"""The machine-readable report: ``{"rows": [...]}`` as the issue specifies, plus context.

Each row has exactly ``name, kind, n, accuracy, ece, adaptive_ce, mce, brier, nll, th_score,
macroce, auroc`` (fractions in [0, 1], TH-Score in the paper's units) and then extra keys
(``ice``, ``aurc``, every registered plugin metric, ``n_invalid``, ``calls_per_item`` / ``calls_total`` and ``cost_usd_per_item`` /
``cost_usd_total``, confidence intervals (``ci95``, method in ``ci_method``) with the ``debiased``
values, reliability-diagram bins, per-category metrics, helped/harmed against majority voting,
``n_ties`` and ``ties``: how ties count for the row, :mod:`.ties`). Every metric is on the decided
items (label A or B; ``metrics_on`` says so), the tie and both-bad label counts are in ``ties``.
NaN (an undefined AUROC on a single class) is written as ``null``: JSON has no NaN.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from judgefuse.calibration.builtin_metrics import BUILTIN_NAMES
from judgefuse.calibration.metric_registry import metric_names
from judgefuse.evaluation.agreement import agreement_dict
from judgefuse.evaluation.runner import CI_METHOD, Evaluation, RowReport
from judgefuse.evaluation.scoring import TIE_RULE
from judgefuse.evaluation.ties import TieReport

ROW_METRICS = ("accuracy", "ece", "adaptive_ce", "mce", "brier", "nll", "th_score", "macroce", "auroc")
"""The issue's fixed row keys, in its order."""
EXTRA_METRICS = tuple(name for name in BUILTIN_NAMES if name not in ("n", *ROW_METRICS))
"""The other built-in metrics (ice, aurc), written after the fixed keys."""


def extra_metrics() -> tuple[str, ...]:
    """Every registered metric after the fixed keys: :data:`EXTRA_METRICS`, then plugins' metrics."""
    return tuple(name for name in metric_names() if name not in ("n", *ROW_METRICS))


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, dict):
        return {key: _clean(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(item) for item in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _clean(value.item())
    return value


def row_record(
    report: RowReport, undefined_answers: Mapping[str, int] | None = None, ties: TieReport | None = None
) -> dict[str, Any]:
    """One row of the JSON report (``ties``: how ties count for it, :mod:`.ties`)."""
    row = report.row
    record: dict[str, Any] = {"name": row.name, "kind": row.kind, "n": int(row.correct.size)}
    record.update({metric: report.metrics[metric] for metric in ROW_METRICS})
    record.update({metric: report.metrics[metric] for metric in extra_metrics()})
    record["n_invalid"] = row.n_invalid
    record["n_ties"] = row.n_ties
    if row.kind == "judge":
        record["n_undefined_answers"] = int((undefined_answers or {}).get(row.name, 0))
    n = int(row.correct.size)
    record["calls_per_item"] = row.calls / n if n else None
    record["calls_total"] = row.calls
    record["cost_usd_per_item"] = row.cost_usd / n if n else None
    record["cost_usd_total"] = row.cost_usd
    record["ci95"] = {metric: list(bounds) for metric, bounds in report.ci.items()}
    record["debiased"] = {metric: interval.debiased for metric, interval in report.intervals.items()}
    record["reliability"] = [bin_.as_dict() for bin_ in report.reliability]
    if report.per_category:
        record["per_category"] = {
            category: {**metrics, "n": int(metrics["n"])} for category, metrics in report.per_category.items()
        }
    if report.helped_harmed is not None:
        record["vs_majority"] = report.helped_harmed.as_dict()
    if ties is not None:
        record["ties"] = {key: value for key, value in ties.as_dict().items() if key != "name"}
    return record


def to_json(
    evaluation: Evaluation, *, sources: list[str], undefined_answers: Mapping[str, int] | None = None
) -> str:
    """Serialise an evaluation to the JSON text written by ``--json``.

    ``undefined_answers`` (judge -> count of answers its format does not define, read as invalid)
    is written as given, ``{}`` when none.
    """
    document = {
        "sources": sources,
        "n_items": evaluation.n_items,
        "n_labelled": evaluation.n_labelled,
        "options": asdict(evaluation.options),
        "ci_method": f"95% bootstrap, {CI_METHOD} (always contains the estimate)",
        "tie_rule": TIE_RULE,
        "metrics_on": "decided items (label A or B); each row's \"ties\" says how ties count",
        "rows": [row_record(report, undefined_answers, _ties_of(evaluation, report)) for report in evaluation.rows],
        "agreement": agreement_dict(evaluation.agreement, evaluation.judges_alpha),
        "skipped_methods": evaluation.skipped_methods,
        "chosen": evaluation.chosen,
        "judge_warnings": [warning.as_dict() for warning in evaluation.judge_warnings],
        "undefined_answers": dict(undefined_answers or {}),
    }
    return json.dumps(_clean(document), indent=2, allow_nan=False) + "\n"


def _ties_of(evaluation: Evaluation, report: RowReport) -> TieReport | None:
    return next((t for t in evaluation.ties if t.name == report.row.name), None)
