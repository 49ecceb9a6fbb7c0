"""What this process wrote, per (tenant, panel): a counter each write through a
:class:`~judgefuse.service.storage.base.Storage` object moves, in memory, for readers that keep
an answer while the data under it has not changed (docs/design.md, 'Reports').

Reading it costs nothing (no query, no thread), so a cached report can check it on every poll;
it only sees this process's writes, so such a reader also re-reads the shared counters
(:func:`judgefuse.service.estimates.reports.data_version`) now and then for other replicas'.
:mod:`.contracts` marks it in the template methods that write records: ``save_verdict`` (its
panel), ``set_label`` and ``undo_label`` (the record's panel; nothing when they wrote nothing)
and ``apply_retention`` (every tenant). A write that raised is marked too, for its panel or
(a label's, whose panel is not known then) the whole tenant: it may have landed before the error.
"""

from __future__ import annotations

__all__ = ["LocalWrites"]


class LocalWrites:
    """Counters of writes by this process: every tenant's, each tenant's, each (tenant, panel)'s."""

    def __init__(self) -> None:
        self._every = 0
        self._tenants: dict[str, int] = {}
        self._panels: dict[tuple[str, str], int] = {}

    def mark(self, tenant: str | None = None, panel: str | None = None) -> None:
        """A write of (tenant, panel); ``panel`` None: any panel of ``tenant``; ``tenant`` None:
        any tenant's."""
        if tenant is None:
            self._every += 1
        elif panel is None:
            self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        else:
            self._panels[(tenant, panel)] = self._panels.get((tenant, panel), 0) + 1

    def version(self, tenant: str, panel: str) -> tuple[int, int, int]:
        """Moves whenever a write of (tenant, panel) was marked (equal tuples: none since)."""
        return (self._every, self._tenants.get(tenant, 0), self._panels.get((tenant, panel), 0))
