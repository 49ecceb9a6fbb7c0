"""What a retention pass did (``Storage.apply_retention``): counts, for the log and the CLI."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RetentionReport"]


@dataclass(frozen=True)
class RetentionReport:
    """``dropped``: verdict records deleted; ``kept_pending``: older records kept because they
    wait for review (queued, unlabelled); ``kept_labelled``: older labelled records kept because
    they are among the newest ``keep_labelled`` labelled records of their (tenant, panel)."""

    dropped: int
    kept_pending: int
    kept_labelled: int
