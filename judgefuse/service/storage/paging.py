"""Rows per page of a keyset scan (``Storage.iter_records``: export, retention-safe reads),
bounded by bytes as well as by count.

A page of ``batch_size`` rows is constant memory only while rows are small: 1,000 records of
~370 kB each (long answers stored with the item) are 370 MB of text before parsing, and an
export of such records peaked at 515 MB. So a scan starts with a small page, measures the
stored bytes per row, and sizes each next page to hold about :data:`PAGE_BYTES` of text, never
more than the caller's ``batch_size`` rows nor fewer than one.
"""

from __future__ import annotations

__all__ = ["FIRST_PAGE_ROWS", "PAGE_BYTES", "PageSizer"]

PAGE_BYTES = 4 << 20
"""Stored text per page the scan aims at (4 MiB; parsed records take a few times that)."""
FIRST_PAGE_ROWS = 16
"""Rows of the first page, before any row size is known."""


class PageSizer:
    """``rows``: the LIMIT of the next page; ``observe`` the page just read."""

    def __init__(self, max_rows: int, *, page_bytes: int = PAGE_BYTES) -> None:
        self.max_rows = max(1, int(max_rows))
        self.page_bytes = page_bytes
        self.rows = min(self.max_rows, FIRST_PAGE_ROWS)

    def observe(self, rows: int, stored_bytes: int) -> None:
        """Size the next page from the mean stored size of the ``rows`` just read."""
        if rows <= 0:
            return
        per_row = max(1.0, stored_bytes / rows)
        self.rows = max(1, min(self.max_rows, int(self.page_bytes / per_row)))
