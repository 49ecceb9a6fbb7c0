"""One stored verdict as the console's verdict page shows it: the item, every judge's vote
(choice, confidence, explanation, latency, calls, tokens, cost, error), the fused decision, the
route with the threshold version that made it, the review stamp, the label and its history
(every label, relabel, comment change and undo, who and when: storage's label history).

Text is shown as text: the template autoescapes it and keeps its line breaks; nothing in a
question, an answer or an explanation is ever rendered as markup.
"""

from __future__ import annotations

import time
from typing import Any

from judgefuse.judges.types import LETTERS
from judgefuse.service.storage import LabelEvent, ThresholdRecord, VerdictRecord

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


_WHAT = {"labelled": "labelled {label}", "relabelled": "relabelled {label} (was {previous})",
         "commented": "comment on {label}", "undone": "undone (was {previous})"}


def history_rows(record: VerdictRecord, history: list[LabelEvent]) -> list[dict[str, Any]]:
    """The label history as table rows, oldest first. A label stored before the history was
    kept has no entry: it is shown as one row that says so."""
    rows = [{
        "seq": e.seq, "when": _when(e.at), "action": e.action, "label": e.label or "",
        "what": _WHAT[e.action].format(label=e.label, previous=e.previous), "by": e.by or "–",
        "comment": e.comment, "stratum": e.stratum or "–", "note": None,
    } for e in history]
    if not rows and record.label is not None:
        rows.append({"seq": 0, "when": _when(record.labelled_at), "action": "labelled",
                     "label": record.label, "what": f"labelled {record.label}", "by": "–",
                     "comment": record.label_comment,
                     "stratum": record.review.stratum if record.review else "–",
                     "note": "stored before label history was kept"})
    return rows


def verdict_view(
    record: VerdictRecord, threshold: ThresholdRecord | None, history: list[LabelEvent] | None = None
) -> dict[str, Any]:
    """The verdict page's data; ``threshold`` is the version that routed it (None: none);
    ``history`` the verdict's label history (storage's, oldest first)."""
    verdict = record.verdict
    votes = [{
        "judge": v.judge, "mode": v.mode, "choice": v.choice, "tie": v.tie, "confidence": v.confidence,
        "p_a": v.p_a, "explanation": v.explanation, "latency_s": v.latency_s, "calls": v.calls,
        "tokens": v.prompt_tokens + v.completion_tokens, "cost_usd": v.cost_usd, "error": v.error,
        "agrees": v.choice is not None and v.choice == verdict.choice,
        "right": None if record.label not in LETTERS or v.choice is None else v.choice == record.label,
    } for v in verdict.votes]
    stamp = record.review
    rows = history_rows(record, history or [])
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
        "wrong": record.label in LETTERS and verdict.choice != record.label,
        "history": rows,
        "history_dropped": max(0, rows[0]["seq"] - 1) if rows else 0,
        "decided_at": _when(record.decided_at) if record.decided_at is not None else None,
    }
