"""A metric: the share of items answered wrongly with confidence >= 0.9 (lower is better).

For the live service it keeps its own counter (``jfx_confident_errors.wrong``), one integer per
labelled verdict, so a relabel undoes it exactly.
"""

from __future__ import annotations

import numpy as np

from judgefuse.calibration.metric_registry import Metric, register_metric

THRESHOLD = 0.9


def confident_errors(confidence, correct, weights, options) -> float:  # noqa: ANN001 - the point protocol
    return float(np.average((confidence >= THRESHOLD) & (correct == 0), weights=weights))


register_metric(Metric(
    "jfx_confident_errors", confident_errors, label="ConfErr", percent=True, digits=1,
    higher_is_better=False, interval=True, bounds=(0.0, 1.0), weighted=True,
    increments=lambda confidence, right: {"wrong": int(confidence >= THRESHOLD and not right)},
    from_fields=lambda totals: totals.fields.get("wrong", 0) / totals.n if totals.n else float("nan"),
))
