"""Which labelled verdicts are evidence for a method's threshold, as (confidence, correct).

A threshold is tuned for one fusion method (and, for a learned one, one model version), so
only data that method would have produced counts: a stacked model's own verdicts (never in its
training set, so an honest hold-out), the fuser's own verdicts (it is not re-runnable offline),
or, for a voting method, every stored vote set re-fused (a pure function of the votes). Cascade
verdicts hold only the votes of the judges they consulted, so they are never re-fused.
"""

from __future__ import annotations

from collections.abc import Sequence

from judgefuse.service.panels import PanelRuntime
from judgefuse.service.storage import VerdictRecord

__all__ = ["tuning_data"]


def tuning_data(
    records: Sequence[VerdictRecord], runtime: PanelRuntime, method_name: str,
    model_version: str | None,
) -> tuple[str, list[float], list[bool]]:
    """(what the data is, in words; confidences; whether each verdict matched its label)."""
    confidences: list[float] = []
    correct: list[bool] = []
    how: str
    if method_name == "stacked":
        # only verdicts this very model made: their labels were never in its training set
        how = f"verdicts made by stacked model {model_version} (held out from its fit)"
        for r in records:
            v = r.verdict
            if v.method == "stacked" and v.model_version == model_version:
                confidences.append(v.confidence if v.choice else 0.5)
                correct.append(v.choice == r.label)
    elif method_name == "fuser":
        how = "verdicts made by the fuser"
        for r in records:
            if r.verdict.method == "fuser":
                confidences.append(r.verdict.confidence)
                correct.append(r.verdict.choice == r.label)
    else:
        # a voting method is a pure function of the stored votes: re-fuse every record
        how = f"every labelled verdict's votes re-fused with {method_name}"
        method = runtime.method(method_name)
        for r in records:
            if r.verdict.method == "cascade":
                continue  # a cascade verdict holds only the votes of the judges it consulted
            v = method(r.verdict.votes)
            confidences.append(v.confidence)
            correct.append(v.choice == r.label)
    return how, confidences, correct
