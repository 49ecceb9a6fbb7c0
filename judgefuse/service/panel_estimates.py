"""Per-judge accuracy without labels and the panel's effective size, from stored verdicts
(the ``panel_structure`` block of ``GET /v1/calibration``).

The numbers are :func:`judgefuse.fusion.panel_structure.panel_structure`'s (the same code as
``judgefuse eval``'s panel table), computed on the panel's newest ``window`` verdicts (labelled
or not: Dawid-Skene and the label-free effective size read every one) together with its newest
``window`` labelled verdicts (the labelled accuracy and labelled effective size read those).
Cascade verdicts are left out: they hold only the votes of the stages they reached. Dawid-Skene
is refitted on this sample for every query (a worker thread; milliseconds for thousands of
verdicts), so the estimates describe the traffic in the window whether or not the panel serves
a Dawid-Skene model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from judgefuse.fusion.panel_structure import JudgeEstimate, PanelStructure, panel_structure
from judgefuse.service.storage import Storage, VerdictRecord

__all__ = ["panel_estimates"]


async def panel_estimates(
    storage: Storage, tenant: str, panel: str, *, window: int, judges: Sequence[str] = (),
) -> PanelStructure | None:
    """The panel structure of (tenant, panel)'s stored verdicts (module docstring); None when
    there are fewer than two judges or no valid vote (or the backend cannot list recent ones
    and nothing is labelled). Every name in ``judges`` (the panel's) is listed, one without a
    vote in the sample with ``n_votes`` 0 and no estimates."""
    try:
        recent = await storage.iter_recent(tenant, panel, limit=window)
    except NotImplementedError:
        recent = []
    labelled = await storage.iter_labelled(tenant, panel, limit=window)
    records: dict[str, VerdictRecord] = {}
    for record in [*labelled, *recent]:  # a labelled record listed twice is the same record
        if record.verdict.method != "cascade":
            records.setdefault(record.id, record)
    if not records:
        return None
    ordered = sorted(records.values(), key=lambda r: (r.created_at, r.id))
    batches = [list(r.verdict.votes) for r in ordered]
    labels = [r.label for r in ordered]
    structure = await asyncio.to_thread(panel_structure, batches, labels)
    if structure is None:
        return None
    seen = {e.judge for e in structure.judges}
    silent = [JudgeEstimate(judge=name, n_votes=0, labelled_accuracy=None, estimated_accuracy=None)
              for name in judges if name not in seen]
    return replace(structure, judges=[*structure.judges, *silent]) if silent else structure
