"""One stored verdict as the console's verdict page shows it: the item, every judge's vote
(choice, confidence, explanation, latency, calls, tokens, cost, error), the fused decision, the
route with the threshold version that made it, the review stamp and the label.

Text is shown as text: the template autoescapes it and keeps its line breaks; nothing in a
question, an answer or an explanation is ever rendered as markup.
"""

from __future__ import annotations

import time
from typing import Any

from judgefuse.service.storage import ThresholdRecord, VerdictRecord

__all__ = ["fmt", "usd", "verdict_view"]


def fmt(value: Any, digits: int = 3) -> str:
    """A number for a table cell; an en dash for none."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def usd(value: float | None) -> str:
    """Money to 6 significant digits (judge calls cost fractions of a cent)."""
    if value is None:
        return "–"
    return f"${value:.6g}" if value else "$0"


def _when(epoch: float | None) -> str:
    return "–" if epoch is None else time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def verdict_view(record: VerdictRecord, threshold: ThresholdRecord | None) -> dict[str, Any]:
    """The verdict page's data; ``threshold`` is the version that routed it (None: none)."""
    verdict = record.verdict
    votes = [{
        "judge": v.judge, "mode": v.mode, "choice": v.choice, "confidence": v.confidence,
        "p_a": v.p_a, "explanation": v.explanation, "latency_s": v.latency_s, "calls": v.calls,
        "tokens": v.prompt_tokens + v.completion_tokens, "cost_usd": v.cost_usd, "error": v.error,
        "agrees": v.choice is not None and v.choice == verdict.choice,
        "right": None if record.label not in ("A", "B") or v.choice is None else v.choice == record.label,
    } for v in verdict.votes]
    stamp = record.review
    label_events = []
    if record.label is not None:
        label_events.append({
            "when": _when(record.labelled_at), "label": record.label,
            "comment": getattr(record, "label_comment", None),
            "note": "current label (a relabel replaces it; storage keeps the latest)",
        })
    decided_at = getattr(record, "decided_at", None)
    if decided_at is not None and decided_at != record.labelled_at:
        label_events.append({"when": _when(decided_at), "label": "A or B",
                             "comment": None, "note": "first decided label (what the monitor counted)"})
    return {
        "id": record.id,
        "panel": record.panel,
        "created": _when(record.created_at),
        "item": record.item,
        "votes": votes,
        "verdict": verdict,
        "cost_usd": sum(v.cost_usd for v in verdict.votes),
        "latency_s": max((v.latency_s for v in verdict.votes), default=0.0),
        "route": (stamp.route if stamp and stamp.route else verdict.route),
        "stamp": stamp,
        "threshold_version": record.threshold_version,
        "threshold": threshold,
        "label": record.label,
        "wrong": record.label in ("A", "B") and verdict.choice != record.label,
        "label_events": label_events,
    }
