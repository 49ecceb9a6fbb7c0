"""One progress bar for the offline commands (``eval``, ``judge``, the fuser's row).

Every long offline step shows the same bar on stderr (label, bar, done/total, elapsed), so the
report on stdout stays clean for pipes, and the bar disappears when the step ends.
"""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

__all__ = ["progress_bar"]


def progress_bar(label: str, *, quiet: bool) -> Progress:
    """A transient bar on stderr headed by ``label`` (a rich format string: ``{task.description}``
    shows the task's current description); ``quiet`` disables it."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=quiet,
    )
