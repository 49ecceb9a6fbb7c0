"""Which threshold routes a verdict once learned fusion is promoted (docs/design.md, 'Learning keeps
routing').

A threshold is tuned for one fusion method and, for a learned one, one model version. A refit
that promotes a model also tunes a threshold for it (on the same labels, from cross-fitted
confidences) and stores the two as one :class:`~judgefuse.service.storage.ModelRecord` (the
threshold embedded, and also kept as its own threshold version for the history). So a verdict
is routed by:

1. the latest threshold record of (tenant, panel) when it applies to the verdict (tuned for its
   method and model version: e.g. an operator's retune, or a "review everything" record);
2. else the threshold promoted with the verdict's model, when it is that model's verdict;
3. else the latest record anyway, and routing says why it does not apply ("retune").

Before pairing, every promotion switched auto-accept off until someone retuned by hand (the
latest threshold named the previous model): rule 2 is what keeps the loop routing.
"""

from __future__ import annotations

from judgefuse.fusion.verdict import Verdict
from judgefuse.service.storage import ModelRecord, ThresholdRecord

__all__ = ["routing_threshold", "threshold_applies"]


def threshold_applies(record: ThresholdRecord, verdict: Verdict) -> bool:
    """Whether ``record`` was tuned for ``verdict``'s method (and model version, if any)."""
    if record.method != verdict.method:
        return False
    wanted = record.details.get("model_version")
    return not wanted or wanted == verdict.model_version


def routing_threshold(
    latest: ThresholdRecord | None, model: ModelRecord | None, verdict: Verdict
) -> ThresholdRecord | None:
    """The threshold record that routes ``verdict`` (rules in the module docstring). Pure."""
    if latest is not None and threshold_applies(latest, verdict):
        return latest
    paired = model.threshold if model is not None else None
    if (
        paired is not None
        and verdict.method == model.method  # type: ignore[union-attr]
        and verdict.model_version == model.params.get("model_version")  # type: ignore[union-attr]
    ):
        return paired
    return latest
