"""Every interval in every report of the shared data contains its point estimate.

The reports are the ones ``judgefuse eval`` prints for the three real sources (every judge, the
default methods; LLMBar with the voting and recalibrated-majority methods, where the percentile
interval once put ECE 0.62% outside [0.80, 3.93] for majority+isotonic).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judgefuse.evaluation.json_report import to_json
from judgefuse.evaluation.loaders import load
from judgefuse.evaluation.runner import CI_METRICS, EvaluationOptions, evaluate

SOURCES = {
    "judgebench": ("judgebench", None),
    "trust_or_escalate": ("trust_or_escalate", None),
    "llmbar": ("llmbar", ("majority", "confidence_weighted", "majority+platt", "majority+isotonic")),
}


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_interval_contains_its_estimate(shared_data: Path, source: str) -> None:
    folder, methods = SOURCES[source]
    items = load(shared_data / folder)
    evaluation = evaluate(items, options=EvaluationOptions(methods=methods, n_bootstrap=300))
    checked = 0
    for report in evaluation.rows:
        for metric in CI_METRICS:
            low, high = report.ci[metric]
            estimate = report.metrics[metric]
            assert low <= estimate <= high, f"{source} {report.row.name} {metric}: {estimate} not in [{low}, {high}]"
            checked += 1
    document = json.loads(to_json(evaluation, sources=[folder]))
    for row in document["rows"]:
        for metric, (low, high) in row["ci95"].items():
            assert low <= row[metric] <= high
    assert "contains the estimate" in document["ci_method"]
    assert checked == 2 * len(evaluation.rows) >= 2 * 3
